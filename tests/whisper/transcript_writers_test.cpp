// Transcript file layouts: SRT (SubRip: 1-based cue numbers, HH:MM:SS,mmm) and WebVTT (header,
// HH:MM:SS.mmm cues), txt one segment a line, json parseable with the segment fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "apps/common/transcript/writers.h"

namespace vrun::transcript {
namespace {

Segment segment(double start, double end, std::string text, std::vector<int32_t> tokens, double lp, double ns) {
  Segment s;
  s.start = start;
  s.end = end;
  s.text = std::move(text);
  s.tokens = std::move(tokens);
  s.avg_logprob = lp;
  s.no_speech_prob = ns;
  return s;
}

Transcript sample() {
  Transcript t;
  t.segments.push_back(segment(0.0, 4.5, " Go forward ten meters.", {50363, 1514, 50588}, -0.25, 0.01));
  t.segments.push_back(segment(3661.5, 3662.02, " Done.", {50363, 1514, 50389}, -0.5, 0.02));
  return t;
}

// The transcript rendered as `format` for a.wav; a failed render fails the test and gives "".
std::string rendered(const Transcript& t, const std::string& format) {
  auto r = render_transcript(t, format, "a.wav");
  EXPECT_TRUE(r.is_ok()) << format << ": " << r.status().message();
  return r.is_ok() ? *r : std::string();
}

TEST(TranscriptWriters, Timestamps) {
  EXPECT_EQ(format_timestamp(0.0), "00:00:00.000");
  EXPECT_EQ(format_timestamp(3661.5), "01:01:01.500");
  EXPECT_EQ(format_timestamp(59.9996, ','), "00:01:00,000");
  EXPECT_EQ(format_timestamp(-1.0), "00:00:00.000");
}

TEST(TranscriptWriters, Formats) {
  const Transcript t = sample();
  EXPECT_EQ(rendered(t, "srt"), "1\n00:00:00,000 --> 00:00:04,500\nGo forward ten meters.\n\n2\n01:01:01,500 --> 01:01:02,020\nDone.\n\n");
  EXPECT_EQ(rendered(t, "vtt"), "WEBVTT\n\n00:00:00.000 --> 00:00:04.500\nGo forward ten meters.\n\n01:01:01.500 --> 01:01:02.020\nDone.\n\n");
  EXPECT_EQ(rendered(t, "txt"), "Go forward ten meters.\nDone.\n");
  const auto j = nlohmann::json::parse(rendered(t, "json"));
  EXPECT_EQ(j["text"], "Go forward ten meters. Done.");
  ASSERT_EQ(j["segments"].size(), 2u);
  EXPECT_EQ(j["segments"][1]["start"].get<double>(), 3661.5);
  EXPECT_EQ(j["segments"][0]["tokens"][1].get<int>(), 1514);
  EXPECT_FALSE(render_transcript(t, "docx", "a.wav").is_ok());
}

// openai-whisper's WriteTSV: a header, integer milliseconds (rounded), tabs in text as spaces.
TEST(TranscriptWriters, TsvAndJsonWords) {
  Transcript t = sample();
  t.segments[0].text = " Go\tforward ten meters.";
  t.segments[0].words = {{0.0, 0.4, " Go", 0.9}, {0.4, 1.0, " forward", 0.8}};
  t.segments[0].temperature = 0.2;
  t.segments[0].compression_ratio = 1.25;
  EXPECT_EQ(rendered(t, "tsv"), "start\tend\ttext\n0\t4500\tGo forward ten meters.\n3661500\t3662020\tDone.\n");
  const auto j = nlohmann::json::parse(rendered(t, "json"));
  ASSERT_EQ(j["segments"][0]["words"].size(), 2u);
  EXPECT_EQ(j["segments"][0]["words"][1]["word"], " forward");
  EXPECT_DOUBLE_EQ(j["segments"][0]["words"][1]["start"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(j["segments"][0]["temperature"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(j["segments"][0]["compression_ratio"].get<double>(), 1.25);
  EXPECT_FALSE(j["segments"][1].contains("words"));
  EXPECT_EQ(j["language"], "en");
}

}  // namespace
}  // namespace vrun::transcript
