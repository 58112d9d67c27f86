// The small random-weight Parakeet models of tests/data/parakeet (made with NeMo by
// tests/reference/make_parakeet_goldens.py): the .nemo archive and the Hugging Face folder of the
// same weights import to the same tensors, vocabulary and features.
#include <gtest/gtest.h>

#include <cstring>

#include "apps/parakeet/parakeet_runner.h"
#include "models/parakeet/parakeet_import.h"
#include "preprocess/audio_loader.h"

namespace vrun::parakeet {
namespace {

const std::string kData = std::string(VRUN_TEST_DATA) + "/parakeet";

size_t byte_size(const Weight& w) {
  int64_t n = 1;
  for (int64_t d : w.shape) n *= d;
  return static_cast<size_t>(dtype_bytes(w.dtype, n));
}

class Models : public ::testing::TestWithParam<const char*> {};

TEST_P(Models, NemoAndHfFolderHoldTheSameModel) {
  const std::string kind = GetParam();
  auto nemo = import_nemo(kData + "/" + kind + "_small.nemo");
  ASSERT_TRUE(nemo.is_ok()) << nemo.status().message();
  auto hf = import_hf_parakeet(kData + "/" + kind + "_small_hf");
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  const ParakeetConfig& a = nemo->config;
  const ParakeetConfig& b = hf->config;
  EXPECT_EQ(a.describe(), b.describe());
  EXPECT_EQ(a.head, kind == std::string("tdt") ? HeadKind::kTdt : HeadKind::kCtc);
  // Every NeMo tensor but the featurizer's has its HF twin with the same bytes.
  for (const auto& [name, w] : nemo->weights) {
    if (name.find("num_batches_tracked") != std::string::npos) continue;
    auto it = hf->weights.find(name);
    ASSERT_NE(it, hf->weights.end()) << name;
    ASSERT_EQ(it->second.shape, w.shape) << name;
    ASSERT_EQ(it->second.dtype, w.dtype) << name;
    EXPECT_EQ(std::memcmp(it->second.data, w.data, byte_size(w)), 0) << name;
  }
  ASSERT_EQ(nemo->vocab.size(), hf->vocab.size());
  for (size_t i = 0; i < nemo->vocab.size(); ++i) {
    EXPECT_EQ(nemo->vocab.pieces[i], hf->vocab.pieces[i]) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Parakeet, Models, ::testing::Values("tdt", "ctc"));

}  // namespace
}  // namespace vrun::parakeet
