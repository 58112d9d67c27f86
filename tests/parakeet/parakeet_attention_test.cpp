// The encoder's attention built as bmm, softmax, bmm over materialised scores
// (BuildSettings::fused_attention = false) against NVIDIA NeMo's token ids, frames and durations
// (tests/data/parakeet/goldens.json); the fused default is checked in parakeet_goldens_test.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/parakeet/parakeet_runner.h"
#include "preprocess/audio_loader.h"

namespace vrun::parakeet {
namespace {

const std::string kTestData = VRUN_TEST_DATA;
const std::string kData = kTestData + "/parakeet";

TEST(ParakeetAttention, UnfusedMatchesNemo) {
  std::ifstream in(kData + "/goldens.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  BuildSettings bs;
  bs.fused_attention = false;
  bs.max_batch = 1;
  for (const char* kind : {"tdt", "ctc"}) {
    auto r = ParakeetRunner::load(kData + "/" + kind + "_small.nemo", {BackendKind::kCpu, 2, bs});
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    for (const auto& [name, clip] : g["clips"].items()) {
      SCOPED_TRACE(std::string(kind) + " " + name);
      auto audio = preprocess::load_audio(kTestData + "/" + clip["path"].get<std::string>());
      ASSERT_TRUE(audio.is_ok());
      Transcript stats;
      auto d = (*r)->decode(audio->samples, {}, &stats);
      ASSERT_TRUE(d.is_ok()) << d.status().message();
      const nlohmann::json& want = g[kind]["clips"][name];
      std::vector<int64_t> ids, frames;
      for (const auto& t : d->tokens) {
        ids.push_back(t.id);
        frames.push_back(t.start);
      }
      EXPECT_EQ(ids, want["token_ids"].get<std::vector<int64_t>>());
      if (std::string(kind) == "tdt") {
        EXPECT_EQ(frames, want["token_frames"].get<std::vector<int64_t>>());
        EXPECT_EQ(d->durations, want["durations"].get<std::vector<int64_t>>());
      }
    }
  }
}

}  // namespace
}  // namespace vrun::parakeet
