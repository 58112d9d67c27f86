// Loading: every container/codec at 8, 22.05, 44.1 and 48 kHz, mono and stereo, written by
// libsndfile's encoders from an analytic signal and checked against that signal after the down-mix
// and the resampling to 16 kHz; then files that are broken in each way a user meets.
#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

#include "preprocess/audio_loader.h"
#include "preprocess/resampler.h"
#include "tests/preprocess/audio_test_util.h"

namespace vrun::preprocess {
namespace {

using testing::Encoding;

struct Case {
  Encoding enc;
  int rate;
  int channels;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const Encoding& e : testing::all_encodings())
    for (int rate : {8000, 22050, 44100, 48000})
      for (int channels : {1, 2}) cases.push_back({e, rate, channels});
  return cases;
}

class FormatMatrix : public ::testing::TestWithParam<Case> {};

TEST_P(FormatMatrix, DecodesDownmixesAndResamplesTheSignal) {
  const Case& c = GetParam();
  const std::string path = testing::temp_path(c.enc.name + "_" + std::to_string(c.rate) + "_" +
                                              std::to_string(c.channels) + "." + c.enc.extension);
  constexpr double kSeconds = 1.0;
  const std::string write_error = testing::write_test_signal(path, c.enc, c.rate, c.channels, kSeconds);
  ASSERT_EQ(write_error, "") << path;

  auto audio = load_audio(path);
  ASSERT_TRUE(audio.is_ok()) << audio.status().to_string();
  EXPECT_EQ(audio->sample_rate, 16000);
  EXPECT_EQ(audio->source_rate, c.rate);
  EXPECT_EQ(audio->source_channels, c.channels);
  // Lossless files keep their length to the sample; the lossy codecs may add a frame of padding.
  const double expect = kSeconds * 16000;
  const double slack = c.enc.lossy ? 0.06 * 16000 : 2;
  EXPECT_NEAR(static_cast<double>(audio->samples.size()), expect, slack);

  // The 440 Hz tone survives at its amplitude; in stereo the 1 kHz component, opposite in the two
  // channels, cancels in the average, and a wrong rate anywhere would break the fit.
  const testing::SineFit fit = testing::fit_sine(audio->samples, 16000, testing::kToneHz, 1600);
  const double amp_tol = c.enc.lossy ? 0.03 : 0.002;
  EXPECT_NEAR(fit.amplitude, testing::kToneAmp, amp_tol * testing::kToneAmp);
  EXPECT_GT(fit.snr_db, c.enc.lossy ? 25.0 : 70.0);
  if (c.channels == 2) {
    const testing::SineFit rest = testing::fit_sine(audio->samples, 16000, testing::kCancelHz, 1600);
    EXPECT_LT(rest.amplitude, c.enc.lossy ? 0.03 : 1e-3);
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.enc.name + "_" + std::to_string(info.param.rate) + "Hz_" + (info.param.channels == 1 ? "mono" : "stereo");
}
INSTANTIATE_TEST_SUITE_P(Formats, FormatMatrix, ::testing::ValuesIn(all_cases()), case_name);

TEST(Loader, KeepsTheFileRateWhenAsked) {
  const std::string path = testing::temp_path("keep_rate.wav");
  ASSERT_EQ(testing::write_test_signal(path, testing::all_encodings()[0], 22050, 1, 0.5), "");
  LoadOptions opts;
  opts.target_rate = 0;
  auto audio = load_audio(path, opts);
  ASSERT_TRUE(audio.is_ok()) << audio.status().to_string();
  EXPECT_EQ(audio->sample_rate, 22050);
  EXPECT_EQ(audio->samples.size(), 11025u);
  EXPECT_GT(testing::fit_sine(audio->samples, 22050, testing::kToneHz, 0).snr_db, 80.0);
}

TEST(Loader, ReadsRawPcmWithExplicitFormat) {
  // Stereo s16 little-endian at 48 kHz, written by hand.
  const int rate = 48000;
  std::vector<uint8_t> bytes;
  for (int i = 0; i < rate; ++i) {
    const double t = static_cast<double>(i) / rate;
    const double tone = testing::kToneAmp * std::sin(2 * std::numbers::pi * testing::kToneHz * t);
    for (double v : {tone + 0.2, tone - 0.2}) {  // opposite offsets cancel in the average
      const int16_t s = static_cast<int16_t>(std::lround(v * 32767));
      bytes.push_back(static_cast<uint8_t>(s & 0xff));
      bytes.push_back(static_cast<uint8_t>((s >> 8) & 0xff));
    }
  }
  const std::string path = testing::temp_path("raw.pcm");
  testing::write_bytes(path, bytes);
  LoadOptions opts;
  opts.raw = RawFormat{rate, 2, RawEncoding::kS16, false};
  auto audio = load_audio(path, opts);
  ASSERT_TRUE(audio.is_ok()) << audio.status().to_string();
  EXPECT_NEAR(static_cast<double>(audio->samples.size()), 16000.0, 2.0);
  const auto fit = testing::fit_sine(audio->samples, 16000, testing::kToneHz, 1600);
  EXPECT_NEAR(fit.amplitude, testing::kToneAmp, 1e-3);
  EXPECT_GT(fit.snr_db, 70.0);
  // The same bytes from memory, as standard input is read.
  auto from_memory = load_audio_memory(bytes, "<stdin>", opts);
  ASSERT_TRUE(from_memory.is_ok()) << from_memory.status().to_string();
  EXPECT_EQ(from_memory->samples, audio->samples);
}

TEST(Loader, MemoryAndFileAgree) {
  const std::string path = testing::temp_path("mem.flac");
  ASSERT_EQ(testing::write_test_signal(path, testing::all_encodings()[4], 44100, 2, 0.5), "");
  auto a = load_audio(path);
  auto b = load_audio_memory(testing::read_bytes(path), "mem.flac");
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->samples, b->samples);
}

TEST(Resampler, StreamingEqualsOneShot) {
  std::vector<float> x(44100);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.05 * static_cast<double>(i)));
  auto whole = Resampler::resample(x, 44100, 16000);
  ASSERT_TRUE(whole.is_ok());
  auto r = Resampler::create(44100, 16000);
  ASSERT_TRUE(r.is_ok());
  std::vector<float> pieces;
  for (size_t b = 0; b < x.size(); b += 1234)
    ASSERT_TRUE(r->process(std::span<const float>(x).subspan(b, std::min<size_t>(1234, x.size() - b)), pieces).is_ok());
  ASSERT_TRUE(r->flush(pieces).is_ok());
  ASSERT_EQ(pieces.size(), whole->size());
  EXPECT_EQ(pieces.size(), 16000u);
  for (size_t i = 0; i < pieces.size(); ++i) ASSERT_NEAR(pieces[i], (*whole)[i], 1e-6f) << i;
  EXPECT_FALSE(Resampler::create(0, 16000).is_ok());
}

// Each broken input gives an error that names the file and says what is wrong.
void expect_error(const Result<AudioBuffer>& r, const std::string& path, const std::string& what) {
  ASSERT_FALSE(r.is_ok()) << path << " loaded";
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
}

TEST(LoaderErrors, MissingEmptyAndNonAudio) {
  expect_error(load_audio(testing::temp_path("does_not_exist.wav")), "does_not_exist.wav", "no such file");
  const std::string empty = testing::temp_path("empty.wav");
  testing::write_bytes(empty, {});
  expect_error(load_audio(empty), empty, "empty");
  expect_error(load_audio_memory({}, "<stdin>"), "<stdin>", "empty");
  const std::string text = testing::temp_path("notes.wav");
  const std::string words = "These are meeting notes, not a recording.\n";
  testing::write_bytes(text, std::vector<uint8_t>(words.begin(), words.end()));
  expect_error(load_audio(text), text, "not a readable audio file");
  expect_error(load_audio(testing::temp_path("")), "vrun_audio_test", "directory");
}

TEST(LoaderErrors, TruncatedFilesOfEveryFormat) {
  for (const Encoding& e : testing::all_encodings()) {
    const std::string path = testing::temp_path("whole_" + e.name + "." + e.extension);
    ASSERT_EQ(testing::write_test_signal(path, e, 44100, 2, 1.0), "");
    std::vector<uint8_t> bytes = testing::read_bytes(path);
    bytes.resize(bytes.size() / 2);
    const std::string cut = testing::temp_path("cut_" + e.name + "." + e.extension);
    testing::write_bytes(cut, bytes);
    auto r = load_audio(cut);
    ASSERT_FALSE(r.is_ok()) << e.name << ": a file cut in half loaded";
    EXPECT_NE(r.status().message().find(cut), std::string::npos) << r.status().message();
    EXPECT_TRUE(r.status().message().find("truncated") != std::string::npos) << e.name << ": " << r.status().message();
  }
}

// A 16-bit mono WAV header whose fields can be set to lie about the data that follows.
std::vector<uint8_t> wav_bytes(uint16_t channels, uint32_t rate, uint32_t data_bytes_claimed, uint32_t data_bytes_real) {
  std::vector<uint8_t> b;
  auto u32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i))); };
  auto u16 = [&](uint16_t v) { for (int i = 0; i < 2; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i))); };
  auto tag = [&](const char* t) { b.insert(b.end(), t, t + 4); };
  tag("RIFF"); u32(36 + data_bytes_claimed); tag("WAVE");
  tag("fmt "); u32(16); u16(1); u16(channels); u32(rate); u32(rate * channels * 2); u16(static_cast<uint16_t>(channels * 2)); u16(16);
  tag("data"); u32(data_bytes_claimed);
  for (uint32_t i = 0; i < data_bytes_real / 2; ++i) u16(static_cast<uint16_t>(static_cast<int16_t>(8000 * std::sin(0.1 * i))));
  return b;
}

TEST(LoaderErrors, HeadersThatLie) {
  const std::string ok = testing::temp_path("honest.wav");
  testing::write_bytes(ok, wav_bytes(1, 16000, 32000, 32000));
  auto good = load_audio(ok);
  ASSERT_TRUE(good.is_ok()) << good.status().to_string();
  EXPECT_EQ(good->samples.size(), 16000u);

  const std::string longer = testing::temp_path("claims_more.wav");
  testing::write_bytes(longer, wav_bytes(1, 16000, 3'200'000, 32000));
  expect_error(load_audio(longer), longer, "truncated");

  const std::string no_channels = testing::temp_path("zero_channels.wav");
  testing::write_bytes(no_channels, wav_bytes(0, 16000, 32000, 32000));
  ASSERT_FALSE(load_audio(no_channels).is_ok());
  EXPECT_NE(load_audio(no_channels).status().message().find(no_channels), std::string::npos);

  const std::string no_rate = testing::temp_path("zero_rate.wav");
  testing::write_bytes(no_rate, wav_bytes(1, 0, 32000, 32000));
  ASSERT_FALSE(load_audio(no_rate).is_ok());
  EXPECT_NE(load_audio(no_rate).status().message().find(no_rate), std::string::npos);

  // A streaming writer's placeholder size is not a lie: the data simply runs to the end.
  // A float WAV holding a NaN.
  SF_INFO info{};
  info.samplerate = 16000;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  const std::string nan_path = testing::temp_path("nan.wav");
  SNDFILE* sf = sf_open(nan_path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(sf, nullptr);
  std::vector<float> data(1600, 0.25f);
  data[777] = std::nanf("");
  sf_writef_float(sf, data.data(), static_cast<sf_count_t>(data.size()));
  sf_close(sf);
  expect_error(load_audio(nan_path), nan_path, "sample 777 is not a finite number");

  const std::string streamed = testing::temp_path("streamed.wav");
  testing::write_bytes(streamed, wav_bytes(1, 16000, 0xFFFFFFFFu, 32000));
  auto s = load_audio(streamed);
  ASSERT_TRUE(s.is_ok()) << s.status().to_string();
  EXPECT_EQ(s->samples.size(), 16000u);
}

TEST(LoaderErrors, BadRawFormats) {
  const std::string path = testing::temp_path("raw_bad.pcm");
  testing::write_bytes(path, std::vector<uint8_t>(1000, 1));
  LoadOptions opts;
  opts.raw = RawFormat{0, 1, RawEncoding::kS16, false};
  expect_error(load_audio(path, opts), path, "sample rate");
  opts.raw = RawFormat{16000, 0, RawEncoding::kS16, false};
  expect_error(load_audio(path, opts), path, "channel");
  EXPECT_FALSE(parse_raw_encoding("s12").is_ok());
}

// Corrupted files of every format (bytes overwritten in the header and the body, or cut at a random
// length) end in a clear result either way: an error naming the input, or finite samples.
TEST(LoaderErrors, CorruptedBytesNeverCrash) {
  std::mt19937 rng(20240607);
  for (const Encoding& e : testing::all_encodings()) {
    const std::string path = testing::temp_path("fuzz_seed_" + e.name + "." + e.extension);
    ASSERT_EQ(testing::write_test_signal(path, e, 22050, 2, 0.3), "");
    const std::vector<uint8_t> original = testing::read_bytes(path);
    int errors = 0;
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<uint8_t> bytes = original;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int f = 0; f < flips; ++f) {
        // Mostly the first 128 bytes, where the headers are.
        const size_t limit = (rng() % 4 == 0) ? bytes.size() : std::min<size_t>(128, bytes.size());
        bytes[rng() % limit] = static_cast<uint8_t>(rng());
      }
      if (trial % 5 == 0) bytes.resize(rng() % bytes.size());
      const std::string name = e.name + " trial " + std::to_string(trial);
      auto r = load_audio_memory(bytes, name);
      if (!r.is_ok()) {
        ++errors;
        EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().message();
        continue;
      }
      for (float v : r->samples) ASSERT_TRUE(std::isfinite(v)) << name;
    }
    EXPECT_GT(errors, 0) << e.name << ": no corruption was detected at all";
  }
}

}  // namespace
}  // namespace vrun::preprocess
