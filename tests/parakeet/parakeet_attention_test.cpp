// The encoder's attention built other ways than the default against NVIDIA NeMo's token ids,
// frames and durations (tests/data/parakeet/goldens.json): as bmm, softmax, bmm over
// materialised scores (BuildSettings::fused_attention = false), and with W_pos applied to the
// positions in every call (projected_positions = false). The default is checked in
// parakeet_goldens_test.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/parakeet/parakeet_runner.h"
#include "preprocess/audio_loader.h"

namespace vrun::parakeet {
namespace {

const std::string kTestData = VRUN_TEST_DATA;
const std::string kData = kTestData + "/parakeet";

void expect_nemo_tokens(BuildSettings bs) {
  std::ifstream in(kData + "/goldens.json");
  const nlohmann::json g = nlohmann::json::parse(in);
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

TEST(ParakeetAttention, UnfusedMatchesNemo) {
  BuildSettings bs;
  bs.fused_attention = false;
  expect_nemo_tokens(bs);
}

TEST(ParakeetAttention, PositionsProjectedPerCallMatchNemo) {
  BuildSettings bs;
  bs.projected_positions = false;
  expect_nemo_tokens(bs);
}

// f16 weights with the unfused attention (f32 operands and positions, as the fused path's are
// halves): the same tokens, frames and durations as the fused f16 program on every clip.
TEST(ParakeetAttention, UnfusedF16MatchesFusedF16) {
  std::ifstream in(kData + "/goldens.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  BuildSettings fused, unfused;
  fused.weight_dtype = unfused.weight_dtype = DType::f16;
  fused.max_batch = unfused.max_batch = 1;
  unfused.fused_attention = false;
  auto a = ParakeetRunner::load(kData + "/tdt_small.nemo", {BackendKind::kCpu, 2, fused});
  auto b = ParakeetRunner::load(kData + "/tdt_small.nemo", {BackendKind::kCpu, 2, unfused});
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  for (const auto& [name, clip] : g["clips"].items()) {
    SCOPED_TRACE(name);
    auto audio = preprocess::load_audio(kTestData + "/" + clip["path"].get<std::string>());
    ASSERT_TRUE(audio.is_ok());
    Transcript sa, sb;
    auto da = (*a)->decode(audio->samples, {}, &sa);
    auto db = (*b)->decode(audio->samples, {}, &sb);
    ASSERT_TRUE(da.is_ok()) << da.status().message();
    ASSERT_TRUE(db.is_ok()) << db.status().message();
    ASSERT_FALSE(da->tokens.empty());
    ASSERT_EQ(da->tokens.size(), db->tokens.size());
    for (size_t i = 0; i < da->tokens.size(); ++i) {
      EXPECT_EQ(da->tokens[i].id, db->tokens[i].id) << i;
      EXPECT_EQ(da->tokens[i].start, db->tokens[i].start) << i;
    }
    EXPECT_EQ(da->durations, db->durations);
  }
}

}  // namespace
}  // namespace vrun::parakeet
