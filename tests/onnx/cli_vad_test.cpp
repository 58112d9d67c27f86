// The long-pause report end to end: `vrun transcribe --vad` with Whisper tiny.en (the real model,
// cached by scripts/fetch-models.sh whisper-tiny) on 7.1 s of speech, 60 s of silence and 3.3 s
// of speech: the second segment must start within 0.5 s of 67.1 s.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>

#include "../cli/cli_test_util.h"
#include "preprocess/audio_loader.h"

namespace vrun {
namespace {

const std::string kVad = std::string(VRUN_TEST_DATA) + "/vad/";

std::string whisper_model() {
  if (const char* env = std::getenv("VRUN_WHISPER_TINY")) return env;
  const char* home = std::getenv("HOME");
  return home ? std::string(home) + "/.cache/vrun/models/whisper-tiny.en" : "";
}

void write_wav16(const std::string& path, const std::vector<float>& x) {
  std::ofstream f(path, std::ios::binary);
  auto u32 = [&](uint32_t v) { f.write(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { f.write(reinterpret_cast<const char*>(&v), 2); };
  const uint32_t bytes = static_cast<uint32_t>(x.size() * 2);
  f.write("RIFF", 4);
  u32(36 + bytes);
  f.write("WAVEfmt ", 8);
  u32(16);
  u16(1);
  u16(1);
  u32(16000);
  u32(32000);
  u16(2);
  u16(16);
  f.write("data", 4);
  u32(bytes);
  for (float v : x) u16(static_cast<uint16_t>(static_cast<int16_t>(std::max(-1.f, std::min(1.f, v)) * 32767)));
}

// Start times (s) of the printed segments "[HH:MM:SS.mmm --> ...]".
std::vector<double> segment_starts(const std::string& out) {
  std::vector<double> t;
  const std::regex re(R"(\[(\d+):(\d+):(\d+\.\d+) -->)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
    t.push_back(std::stod((*it)[1]) * 3600 + std::stod((*it)[2]) * 60 + std::stod((*it)[3]));
  return t;
}

TEST(TranscribeVad, SecondUtteranceAfterALongPauseKeepsItsTime) {
  const std::string model = whisper_model();
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "Whisper tiny.en not cached: " << model;
  auto a = preprocess::load_audio(kVad + "librivox_0870.wav");
  auto b = preprocess::load_audio(kVad + "librivox_0930.wav");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  std::vector<float> x = a->samples;
  x.resize(x.size() + 60 * 16000, 0.f);
  x.insert(x.end(), b->samples.begin(), b->samples.end());
  const std::string wav = ::testing::TempDir() + "/vrun_long_pause.wav";
  write_wav16(wav, x);
  const auto r = testing::run_vrun("transcribe -m " + model + " --backend cpu --vad --vad-model " + kVad +
                                       "silero_vad_16k_op15.onnx " + wav,
                                   "transcribe_vad");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto starts = segment_starts(r.out);
  ASSERT_EQ(starts.size(), 2u) << r.out;
  EXPECT_NEAR(starts[0], 0.0, 0.5) << r.out;
  EXPECT_NEAR(starts[1], 67.1, 0.5) << r.out;
  EXPECT_TRUE(testing::contains(r.out, "amiable")) << r.out;
}

// --vad --batch-size 3: the speech (8 utterances with 3-s pauses, 44 s of it) in two chunks of up
// to 30 s transcribed side by side, each utterance's segment starting where it starts in the
// file, the words of every utterance there.
TEST(TranscribeVad, ChunksSideBySideKeepTheirTimes) {
  const std::string model = whisper_model();
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "Whisper tiny.en not cached: " << model;
  auto a = preprocess::load_audio(kVad + "librivox_0870.wav");
  auto b = preprocess::load_audio(kVad + "librivox_0930.wav");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  std::vector<float> x;
  std::vector<double> starts;  // each utterance's start in the file
  for (int k = 0; k < 4; ++k)
    for (const auto* clip : {&*a, &*b}) {
      if (!x.empty()) x.resize(x.size() + 3 * 16000, 0.f);
      starts.push_back(static_cast<double>(x.size()) / 16000);
      x.insert(x.end(), clip->samples.begin(), clip->samples.end());
    }
  const std::string wav = ::testing::TempDir() + "/vrun_vad_chunks.wav";
  write_wav16(wav, x);
  const auto r = testing::run_vrun("transcribe -m " + model + " --backend cpu --vad --batch-size 3 --vad-model " + kVad +
                                       "silero_vad_16k_op15.onnx " + wav,
                                   "transcribe_vad_chunks");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(testing::contains(r.err, "vrun_vad_chunks.wav: 2 chunks of up to 30 s, 3 at a time")) << r.err;
  const auto got = segment_starts(r.out);
  for (double s : starts) {
    bool found = false;
    for (double g : got) found = found || std::abs(g - s) < 0.6;
    EXPECT_TRUE(found) << "no segment starts near " << s << " s:\n" << r.out;
  }
  size_t dashwood = 0;
  for (size_t at = r.out.find("Dashwood"); at != std::string::npos; at = r.out.find("Dashwood", at + 1)) ++dashwood;
  EXPECT_EQ(dashwood, 4u) << r.out;
}

// A VAD model that cannot be read stops the job before the speech model loads, naming the file.
TEST(TranscribeVad, MissingVadModelIsNamedBeforeTheModelLoads) {
  const std::string model = whisper_model();
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "Whisper tiny.en not cached: " << model;
  const auto r = testing::run_vrun("transcribe -m " + model + " --backend cpu --vad --vad-model /nonexistent/vad.onnx " +
                                       kVad + "espeak.wav",
                                   "transcribe_vad_missing");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(testing::contains(r.err, "vrun transcribe: --vad: /nonexistent/vad.onnx")) << r.err;
  EXPECT_FALSE(testing::contains(r.err, "loaded")) << r.err;
}

}  // namespace
}  // namespace vrun
