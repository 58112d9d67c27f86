// The encoder's attention built other ways than the default against NVIDIA NeMo's token ids,
// frames and durations (tests/data/parakeet/goldens.json): as bmm, softmax, bmm over
// materialised scores (BuildSettings::fused_attention = false), and with W_pos applied to the
// positions in every call (projected_positions = false). The default is checked in
// parakeet_goldens_test. NeMo's limited-context attention (rel_pos_local_attn) against
// goldens_local.json: the encode_local method of a full-attention checkpoint, and a checkpoint
// saved with local attention in its config.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/parakeet/parakeet_runner.h"
#include "preprocess/audio_loader.h"
#include "tests/parakeet/nemo_goldens.h"

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
      expect_tokens(*d, want, std::string(kind) == "tdt");
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

const nlohmann::json& local_goldens() {
  static const nlohmann::json g = [] {
    std::ifstream in(kData + "/goldens_local.json");
    return nlohmann::json::parse(in);
  }();
  return g;
}

// Tokens, frames and durations of every clip as NeMo's with local attention.
void expect_local_tokens(ParakeetRunner& r, const std::string& kind, const TranscribeOptions& o) {
  std::ifstream in(kData + "/goldens.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  for (const auto& [name, clip] : g["clips"].items()) {
    SCOPED_TRACE(kind + " " + name);
    auto audio = preprocess::load_audio(kTestData + "/" + clip["path"].get<std::string>());
    ASSERT_TRUE(audio.is_ok());
    Transcript stats;
    auto d = r.decode(audio->samples, o, &stats);
    ASSERT_TRUE(d.is_ok()) << d.status().message();
    const nlohmann::json& want = local_goldens()[kind]["clips"][name];
    expect_tokens(*d, want, kind == "tdt");
  }
}

TEST(ParakeetAttention, LocalAttentionMatchesNemo) {
  const int64_t window = local_goldens()["window"].get<int64_t>();
  // The goldens are only a test of the band if it changes the tokens.
  ASSERT_FALSE(local_goldens()["tdt"]["differs_from_full_attention"].empty());
  ASSERT_FALSE(local_goldens()["ctc"]["differs_from_full_attention"].empty());
  BuildSettings bs;
  bs.max_batch = 1;
  bs.local_window = window;
  TranscribeOptions local;
  local.local_attention = true;
  for (const char* kind : {"tdt", "ctc"}) {
    auto r = ParakeetRunner::load(kData + "/" + kind + "_small.nemo", {BackendKind::kCpu, 2, bs});
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    expect_local_tokens(**r, kind, local);
    // The encoder output of one clip, within 1e-4 of NeMo's (relative to its largest value).
    auto audio = preprocess::load_audio(kTestData + "/audio/speech_0880.wav");
    ASSERT_TRUE(audio.is_ok());
    auto f = (*r)->features(audio->samples);
    ASSERT_TRUE(f.is_ok());
    auto enc = (*r)->encoder_output(*f, static_cast<int64_t>(audio->samples.size()) / 160, true);
    ASSERT_TRUE(enc.is_ok()) << enc.status().message();
    expect_encoder_output(*enc, local_goldens()[kind]["clips"]["librivox_0880"]["encoder_output"], (*r)->config().d_model, kind);
  }
}

// A checkpoint saved by NeMo with rel_pos_local_attn in its config: encode itself attends
// locally (no flag needed), and there is neither encode_local nor encode_batch.
TEST(ParakeetAttention, LocalCheckpointMatchesNemo) {
  auto r = ParakeetRunner::load(kData + "/" + local_goldens()["tdt"]["local_model"].get<std::string>(), {BackendKind::kCpu, 2, {}});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)->config().local_window, local_goldens()["window"].get<int64_t>());
  EXPECT_EQ((*r)->program().method("encode_local"), nullptr);
  EXPECT_EQ((*r)->program().method("encode_batch"), nullptr);
  expect_local_tokens(**r, "tdt", {});
  TranscribeOptions local;
  local.local_attention = true;  // the same: the checkpoint's own window
  expect_local_tokens(**r, "tdt", local);
}

// Local attention over more frames than one call takes: overlapping chunks, as full attention.
// Away from the chunk edges a frame's receptive field lies inside its chunk, so the tokens match
// the one-call run's (both programs from the same weights).
TEST(ParakeetAttention, LocalAttentionInChunks) {
  BuildSettings one, chunked;
  one.max_batch = chunked.max_batch = 1;
  one.local_window = chunked.local_window = local_goldens()["window"].get<int64_t>();
  chunked.max_local_frames = 200;  // long_concat has 341 encoder frames
  auto a = ParakeetRunner::load(kData + "/ctc_small.nemo", {BackendKind::kCpu, 2, one});
  auto b = ParakeetRunner::load(kData + "/ctc_small.nemo", {BackendKind::kCpu, 2, chunked});
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  auto audio = preprocess::load_audio(kData + "/long_concat.wav");
  ASSERT_TRUE(audio.is_ok());
  TranscribeOptions o;
  o.local_attention = true;
  o.context_frames = 60;
  Transcript sa, sb;
  auto da = (*a)->decode(audio->samples, o, &sa);
  auto db = (*b)->decode(audio->samples, o, &sb);
  ASSERT_TRUE(da.is_ok()) << da.status().message();
  ASSERT_TRUE(db.is_ok()) << db.status().message();
  EXPECT_EQ(sa.stats.windows, 1);
  EXPECT_EQ(sb.stats.windows, 5);
  std::vector<int64_t> ia, ib;
  for (const auto& t : da->tokens) ia.push_back(t.id);
  for (const auto& t : db->tokens) ib.push_back(t.id);
  EXPECT_EQ(ia, ib);
  EXPECT_EQ(ia, local_goldens()["ctc"]["clips"]["long_concat"]["token_ids"].get<std::vector<int64_t>>());
}

// Asking a program without encode_local for local attention is a clear error.
TEST(ParakeetAttention, LocalAttentionNeedsTheMethod) {
  BuildSettings bs;
  bs.max_batch = 1;
  bs.local_window = 0;
  auto r = ParakeetRunner::load(kData + "/ctc_small.nemo", {BackendKind::kCpu, 2, bs});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  auto audio = preprocess::load_audio(kData + "/short_0p62.wav");
  ASSERT_TRUE(audio.is_ok());
  TranscribeOptions o;
  o.local_attention = true;
  auto t = (*r)->transcribe(audio->samples, o);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("no local-attention method"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace vrun::parakeet
