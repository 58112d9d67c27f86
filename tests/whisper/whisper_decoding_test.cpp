// Whisper tiny.en decoding beyond greedy against faster-whisper (tests/data/whisper/
// decoding_goldens.json, made by tests/reference/make_whisper_decoding_goldens.py): beam search
// of 5, conditioning on previous text, an initial prompt, word timestamps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/whisper/whisper_runner.h"
#include "tests/whisper/whisper_clips.h"

namespace vrun::whisper {
namespace {

const nlohmann::json& goldens() {
  static const nlohmann::json g = [] {
    std::ifstream in(std::string(VRUN_TEST_DATA) + "/whisper/decoding_goldens.json");
    return nlohmann::json::parse(in);
  }();
  return g;
}

WhisperRunner* runner() {
  static const std::unique_ptr<WhisperRunner> r = testing::load_tiny_en(5);
  return r.get();
}

#define REQUIRE_MODEL()                                                                                           \
  WhisperRunner* r = runner();                                                                                    \
  if (!r) GTEST_SKIP() << "Whisper tiny.en not found: run tests/reference/fetch_whisper_tiny_en.sh or set VRUN_WHISPER_MODEL"

struct Run {
  Transcript t;
  nlohmann::json golden;
};

// Transcribes the golden's clip with the golden's run settings.
Result<Run> run_golden(WhisperRunner* r, const std::string& key) {
  Run out;
  out.golden = goldens()["clips"][key];
  if (!out.golden.is_object()) return err(ErrorCode::kNotFound, key, " missing from decoding_goldens.json");
  const std::string run = key.substr(0, key.find('/')), clip = key.substr(key.find('/') + 1);
  VRUN_ASSIGN_OR_RETURN(std::vector<float> audio, testing::make_clip(clip));
  if (static_cast<int64_t>(audio.size()) != out.golden["samples"].get<int64_t>())
    return err(ErrorCode::kInvalidArgument, clip, ": clip made differently (", audio.size(), " samples)");
  TranscribeOptions o;
  o.temperatures = {0.0};
  o.condition_on_previous_text = run == "conditioned" || run == "prompt";
  if (run == "beam5") o.beam_size = 5;
  if (run == "words") o.word_timestamps = true;
  if (run == "prompt") o.initial_prompt = goldens()["prompt"].get<std::string>();
  VRUN_ASSIGN_OR_RETURN(out.t, r->transcribe(audio, o));
  return out;
}

void expect_segments(const Run& run, const std::string& key) {
  EXPECT_EQ(run.t.text(), run.golden["text"].get<std::string>()) << key;
  const auto& segs = run.golden["segments"];
  ASSERT_EQ(run.t.segments.size(), segs.size()) << key << ": ours\n" << run.t.text();
  for (size_t i = 0; i < segs.size(); ++i) {
    EXPECT_NEAR(run.t.segments[i].start, segs[i]["start"].get<double>(), 0.2) << key << " segment " << i;
    EXPECT_NEAR(run.t.segments[i].end, segs[i]["end"].get<double>(), 0.2) << key << " segment " << i;
  }
}

class DecodingGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodingGolden, MatchesFasterWhisper) {
  REQUIRE_MODEL();
  const std::string key = GetParam();
  auto run = run_golden(r, key);
  if (!run.is_ok() && run.status().code() == ErrorCode::kNotFound) GTEST_SKIP() << run.status().message();
  ASSERT_TRUE(run.is_ok()) << run.status().message();
  expect_segments(*run, key);
}

INSTANTIATE_TEST_SUITE_P(TinyEn, DecodingGolden,
                         ::testing::Values("beam5/librivox_0870", "beam5/librivox_0920", "beam5/goforward_raw", "beam5/espeak_slow",
                                           "beam5/espeak_fast", "conditioned/long_concat", "prompt/librivox_0920"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// Word times within 0.2 s of faster-whisper's for at least 90% of the words, on every clip
// together; the words themselves must be the same.
TEST(WhisperWords, TimesMatchFasterWhisper) {
  REQUIRE_MODEL();
  int total = 0, close = 0;
  for (const char* clip : {"librivox_0870", "librivox_0920", "goforward_raw", "espeak_slow", "espeak_fast", "long_concat"}) {
    const std::string key = std::string("words/") + clip;
    auto run = run_golden(r, key);
    if (!run.is_ok() && run.status().code() == ErrorCode::kNotFound) GTEST_SKIP() << run.status().message();
    ASSERT_TRUE(run.is_ok()) << run.status().message();
    EXPECT_EQ(run->t.text(), run->golden["text"].get<std::string>()) << key;
    std::vector<transcript::Word> ours;
    for (const auto& s : run->t.segments) ours.insert(ours.end(), s.words.begin(), s.words.end());
    std::vector<nlohmann::json> theirs;
    for (const auto& s : run->golden["segments"])
      for (const auto& w : s["words"]) theirs.push_back(w);
    ASSERT_EQ(ours.size(), theirs.size()) << key;
    for (size_t i = 0; i < ours.size(); ++i) {
      EXPECT_EQ(ours[i].text, theirs[i]["word"].get<std::string>()) << key << " word " << i;
      ++total;
      if (std::abs(ours[i].start - theirs[i]["start"].get<double>()) <= 0.2 + 1e-9 &&
          std::abs(ours[i].end - theirs[i]["end"].get<double>()) <= 0.2 + 1e-9)
        ++close;
      EXPECT_GE(ours[i].probability, 0.0);
      EXPECT_LE(ours[i].probability, 1.0);
    }
  }
  ASSERT_GT(total, 100);
  std::printf("word times within 0.2 s of faster-whisper's: %d of %d\n", close, total);
  EXPECT_GE(close, total * 9 / 10) << close << " of " << total << " words within 0.2 s";
}

TEST(WhisperDecoding, EnglishOnlyModelRejectsOtherLanguages) {
  REQUIRE_MODEL();
  TranscribeOptions o;
  o.language = "de";
  auto t = r->transcribe(std::vector<float>(16000, 0.1f), o);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("English-only"), std::string::npos) << t.status().message();
  o.language = "en";
  o.task = "translate";
  EXPECT_FALSE(r->transcribe(std::vector<float>(16000, 0.1f), o).is_ok());
}

TEST(WhisperDecoding, BeamWiderThanTheBatchIsAClearError) {
  REQUIRE_MODEL();
  TranscribeOptions o;
  o.beam_size = r->decode_batch() + 1;
  auto t = r->transcribe(std::vector<float>(16000, 0.1f), o);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("beam size"), std::string::npos) << t.status().message();
}

// Sampling is reproducible for a seed, and every window result it keeps passes the checks or is
// the most probable of the fallback candidates.
TEST(WhisperDecoding, SamplingIsSeededAndFallbackRecordsTemperature) {
  REQUIRE_MODEL();
  auto audio = testing::make_clip("goforward_raw");
  if (!audio.is_ok()) GTEST_SKIP() << audio.status().message();
  TranscribeOptions o;
  o.temperatures = {0.6};
  o.best_of = 3;
  o.seed = 7;
  o.max_window_tokens = 40;  // keeps a rambling sample short
  auto a = r->transcribe(*audio, o), b = r->transcribe(*audio, o);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->text(), b->text());
  ASSERT_FALSE(a->segments.empty());
  EXPECT_DOUBLE_EQ(a->segments[0].temperature, 0.6);
  EXPECT_GT(a->segments[0].compression_ratio, 0.0);
  EXPECT_LT(a->segments[0].avg_logprob, 0.0);
}

}  // namespace
}  // namespace vrun::whisper
