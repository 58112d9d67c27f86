// `--vad --batch-size N`'s pieces: the speech cut into chunks of up to 30 s at span boundaries, and
// the chunks' transcripts joined into one of the speech-only audio.
#include <gtest/gtest.h>

#include "apps/speech/voice_activity.h"

namespace vrun::speech {
namespace {

SpeechOnly spans_of(const std::vector<double>& seconds) {
  SpeechOnly s;
  int64_t at = 0;
  for (double d : seconds) {
    const int64_t n = static_cast<int64_t>(d * 16000);
    s.spans.push_back({at + 16000, at + 16000 + n});  // a second of silence before each
    at += 16000 + n;
  }
  int64_t total = 0;
  for (const auto& v : s.spans) total += v.end - v.start;
  s.samples.assign(static_cast<size_t>(total), 0.f);
  return s;
}

TEST(SpeechChunks, SpansJoinWhileTheyFitThirtySeconds) {
  // 12 + 10 + 7 = 29 s fit; 5 more would make 34; a 31-s span is a chunk of its own.
  const SpeechOnly s = spans_of({12, 10, 7, 5, 31, 2, 3});
  const std::vector<Chunk> c = chunk_speech(s);
  ASSERT_EQ(c.size(), 4u);
  const int64_t k = 16000;
  EXPECT_EQ(c[0].begin, 0);
  EXPECT_EQ(c[0].end, 29 * k);
  EXPECT_EQ(c[1].begin, 29 * k);
  EXPECT_EQ(c[1].end, 34 * k);
  EXPECT_EQ(c[2].end, 65 * k);
  EXPECT_EQ(c[3].begin, 65 * k);
  EXPECT_EQ(c[3].end, 70 * k);
  EXPECT_EQ(c.back().end, static_cast<int64_t>(s.samples.size()));
  EXPECT_TRUE(chunk_speech(SpeechOnly{}).empty());
  EXPECT_EQ(chunk_speech(s, 100.0).size(), 1u);
}

TEST(SpeechChunks, JoinedTranscriptIsTimedInTheSpeechOnlyAudio) {
  transcript::Transcript a, b;
  a.language = "de";
  a.language_probability = 0.9;
  a.segments.push_back({0.5, 2.0, " one", {1, 2}, {{0.5, 1.0, " one", 0.8}}});
  a.stats.windows = 1;
  a.stats.tokens = 2;
  a.stats.audio_s = 29;
  b.language = "en";
  b.segments.push_back({0.0, 1.5, " two", {3}, {{0.25, 1.5, " two", 0.7}}});
  b.segments.push_back({1.5, 4.0, " three", {4}, {}});
  b.stats.windows = 1;
  b.stats.tokens = 2;
  b.stats.audio_s = 5;
  const transcript::Transcript t = join_chunks({a, b}, {{0, 29 * 16000}, {29 * 16000, 34 * 16000}});
  ASSERT_EQ(t.segments.size(), 3u);
  EXPECT_EQ(t.language, "de");
  EXPECT_DOUBLE_EQ(t.language_probability, 0.9);
  EXPECT_DOUBLE_EQ(t.segments[0].start, 0.5);
  EXPECT_DOUBLE_EQ(t.segments[1].start, 29.0);
  EXPECT_DOUBLE_EQ(t.segments[1].end, 30.5);
  EXPECT_DOUBLE_EQ(t.segments[1].words[0].start, 29.25);
  EXPECT_DOUBLE_EQ(t.segments[2].end, 33.0);
  EXPECT_EQ(t.segments[2].tokens, std::vector<int32_t>{4});
  EXPECT_EQ(t.text(), "one two three");
  EXPECT_EQ(t.stats.windows, 2);
  EXPECT_EQ(t.stats.tokens, 4);
  EXPECT_DOUBLE_EQ(t.stats.audio_s, 34);
}

}  // namespace
}  // namespace vrun::speech
