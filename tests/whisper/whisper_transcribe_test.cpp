// Whisper tiny.en transcripts against faster-whisper's (tests/data/whisper/goldens.json, made by
// tests/reference/make_whisper_goldens.py): greedy, temperature 0, no VAD, no conditioning on
// previous text, with and without timestamps. Text must be equal; segment boundaries within 0.2 s.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/whisper/whisper_runner.h"
#include "tests/whisper/whisper_clips.h"

namespace vrun::whisper {
namespace {

nlohmann::json goldens() {
  std::ifstream in(std::string(VRUN_TEST_DATA) + "/whisper/goldens.json");
  return nlohmann::json::parse(in);
}

WhisperRunner* runner() {
  static const std::unique_ptr<WhisperRunner> r = testing::load_tiny_en(RunnerOptions{}.decode_batch);
  return r.get();
}

class WhisperGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(WhisperGolden, MatchesFasterWhisper) {
  WhisperRunner* r = runner();
  if (!r) GTEST_SKIP() << "Whisper tiny.en not found: run tests/reference/fetch_whisper_tiny_en.sh or set VRUN_WHISPER_MODEL";
  const std::string key = GetParam();
  const nlohmann::json g = goldens()["clips"][key];
  ASSERT_TRUE(g.is_object()) << key << " missing from goldens.json";
  const bool timestamps = key.find("/notimestamps") == std::string::npos;
  const std::string clip = key.substr(0, key.find('/'));
  auto audio = testing::make_clip(clip);
  if (!audio.is_ok()) GTEST_SKIP() << audio.status().message();
  ASSERT_EQ(static_cast<int64_t>(audio->size()), g["samples"].get<int64_t>()) << clip << ": clip made differently";
  TranscribeOptions o;
  o.timestamps = timestamps;
  o.temperatures = {0.0};  // as the goldens were made: no fallback, no conditioning
  o.condition_on_previous_text = false;
  auto t = r->transcribe(*audio, o);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->text(), g["text"].get<std::string>()) << key;
  const auto& segs = g["segments"];
  ASSERT_EQ(t->segments.size(), segs.size()) << key << ": ours\n" << t->text();
  for (size_t i = 0; i < segs.size(); ++i) {
    EXPECT_NEAR(t->segments[i].start, segs[i]["start"].get<double>(), 0.2) << key << " segment " << i;
    EXPECT_NEAR(t->segments[i].end, segs[i]["end"].get<double>(), 0.2) << key << " segment " << i;
    EXPECT_EQ(t->segments[i].text, segs[i]["text"].get<std::string>()) << key << " segment " << i;
  }
}

std::vector<std::string> keys() {
  std::vector<std::string> out;
  for (const char* c : {"librivox_0870", "librivox_0920", "goforward_raw", "espeak_slow", "espeak_fast", "silence_10s", "long_concat"}) {
    out.push_back(c);
    out.push_back(std::string(c) + "/notimestamps");
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(TinyEn, WhisperGolden, ::testing::ValuesIn(keys()), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

TEST(WhisperRunner, SilenceGivesNoText) {
  WhisperRunner* r = runner();
  if (!r) GTEST_SKIP() << "Whisper tiny.en not found: run tests/reference/fetch_whisper_tiny_en.sh or set VRUN_WHISPER_MODEL";
  auto t = r->transcribe(std::vector<float>(16000 * 10, 0.0f), TranscribeOptions{});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->segments.size(), 0u) << t->text();
  EXPECT_EQ(t->stats.windows, 1);
}

TEST(WhisperRunner, EmptyAudioGivesNoSegments) {
  WhisperRunner* r = runner();
  if (!r) GTEST_SKIP() << "Whisper tiny.en not found: run tests/reference/fetch_whisper_tiny_en.sh or set VRUN_WHISPER_MODEL";
  auto t = r->transcribe(std::vector<float>{}, TranscribeOptions{});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->segments.size(), 0u);
  EXPECT_EQ(t->stats.windows, 0);
}

TEST(WhisperRunner, TruncatedModelIsAClearError) {
  const std::string dir = testing::tiny_en_model_dir();
  if (dir.empty()) GTEST_SKIP() << "Whisper tiny.en not found: run tests/reference/fetch_whisper_tiny_en.sh or set VRUN_WHISPER_MODEL";
  const std::filesystem::path cut = std::filesystem::temp_directory_path() / "vrun_whisper_truncated";
  std::filesystem::create_directories(cut);
  for (const char* f : {"config.json", "tokenizer.json"})
    std::filesystem::copy_file(std::filesystem::path(dir) / f, cut / f, std::filesystem::copy_options::overwrite_existing);
  {
    std::ifstream in(std::filesystem::path(dir) / "model.bin", std::ios::binary);
    std::string head(1 << 20, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(cut / "model.bin", std::ios::binary) << head;
  }
  auto r = WhisperRunner::load(cut.string(), RunnerOptions{BackendKind::kCpu, 1});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("model.bin: truncated"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("decoder/embeddings/weight"), std::string::npos) << r.status().message();
  std::filesystem::remove_all(cut);
}

TEST(WhisperRunner, NotAModelIsAClearError) {
  auto r = WhisperRunner::load(std::string(VRUN_TEST_DATA) + "/whisper/espeak_fast.wav", RunnerOptions{});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("not a Whisper model"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace vrun::whisper
