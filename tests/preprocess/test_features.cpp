// Whisper and NeMo log-mel features against goldens made by openai-whisper and NeMo themselves
// (tests/reference/make_audio_goldens.py), on LibriVox speech and a synthetic signal.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "preprocess/audio_loader.h"
#include "preprocess/features.h"
#include "preprocess/nemo_mel.h"
#include "preprocess/whisper_mel.h"

namespace vrun::preprocess {
namespace {

const std::string kDir = std::string(VRUN_TEST_DATA) + "/audio/";
constexpr float kTolerance = 1e-4f;
const char* kClips[] = {"speech_0880", "speech_0930", "synth"};

std::vector<float> load_clip(const std::string& stem) {
  auto audio = load_audio(kDir + stem + ".wav");
  EXPECT_TRUE(audio.is_ok()) << audio.status().to_string();
  if (!audio) return {};
  EXPECT_EQ(audio->sample_rate, 16000);
  return std::move(audio->samples);
}

NpyArray golden(const std::string& name) {
  auto arr = read_npy(kDir + name);
  EXPECT_TRUE(arr.is_ok()) << arr.status().to_string();
  if (!arr) return {};
  EXPECT_EQ(arr->shape.size(), 2u) << name;
  float peak = 0;
  for (float v : arr->data) peak = std::max(peak, std::abs(v));
  EXPECT_GT(peak, 0.0f) << name << " is all zeros";
  return std::move(arr).value();
}

// Max |ours - golden| over the golden's columns (ours may have more frames).
float max_error(const Features& ours, const NpyArray& ref, int64_t columns) {
  float worst = 0;
  const int64_t ref_frames = ref.shape[1];
  for (int64_t m = 0; m < ours.n_mels; ++m)
    for (int64_t t = 0; t < columns; ++t)
      worst = std::max(worst, std::abs(ours.at(m, t) - ref.data[static_cast<size_t>(m * ref_frames + t)]));
  return worst;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(MelFilterbank, MatchesWhisperAssets) {
  for (int n_mels : {80, 128}) {
    const NpyArray ref = golden("whisper_mel_filters" + std::to_string(n_mels) + ".npy");
    auto fb = MelFilterbank::create({16000, 400, n_mels, 0.0, -1.0, false, true});
    ASSERT_TRUE(fb.is_ok()) << fb.status().to_string();
    ASSERT_EQ(ref.shape, (std::vector<int64_t>{n_mels, 201}));
    const std::vector<float> ours = fb->dense();
    float worst = 0;
    for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::abs(ours[i] - ref.data[i]));
    EXPECT_LT(worst, 1e-6f) << n_mels << " mels";
  }
}

TEST(WhisperMel, MatchesOpenaiWhisperWithTranscribePadding) {
  for (const char* clip : kClips) {
    const std::vector<float> audio = load_clip(clip);
    for (int n_mels : {80, 128}) {
      const NpyArray ref = golden(std::string(clip) + "_whisper" + std::to_string(n_mels) + ".npy");
      auto mel = WhisperMelSpectrogram::create({n_mels});
      ASSERT_TRUE(mel.is_ok());
      const Features f = mel->compute(audio);
      const int64_t content = WhisperMelSpectrogram::content_frames(static_cast<int64_t>(audio.size()));
      ASSERT_EQ(f.n_mels, n_mels);
      ASSERT_EQ(f.frames, content + 3000);
      ASSERT_EQ(ref.shape[1], content + 16);
      EXPECT_LE(max_error(f, ref, ref.shape[1]), kTolerance) << clip << " " << n_mels;
      // The rest of the 30-s padding repeats the golden's last column (the log-mel floor).
      float worst = 0;
      for (int64_t m = 0; m < n_mels; ++m)
        for (int64_t t = ref.shape[1]; t < f.frames; ++t)
          worst = std::max(worst, std::abs(f.at(m, t) - ref.data[static_cast<size_t>(m * ref.shape[1] + ref.shape[1] - 1)]));
      EXPECT_LE(worst, kTolerance) << clip << " " << n_mels << " padding frames";
    }
  }
}

TEST(WhisperMel, MatchesOpenaiWhisperWithoutPadding) {
  for (const char* clip : kClips) {
    const std::vector<float> audio = load_clip(clip);
    const NpyArray ref = golden(std::string(clip) + "_whisper80_nopad.npy");
    auto mel = WhisperMelSpectrogram::create({80});
    ASSERT_TRUE(mel.is_ok());
    const Features f = mel->compute(audio, 0);
    ASSERT_EQ(f.frames, ref.shape[1]);
    EXPECT_LE(max_error(f, ref, f.frames), kTolerance) << clip;
  }
}

TEST(WhisperMel, StreamWindowsMatchTheReference) {
  const std::vector<float> audio = load_clip("speech_0930");
  const NpyArray ref = golden("speech_0930_whisper80.npy");
  auto mel = WhisperMelSpectrogram::create({80});
  ASSERT_TRUE(mel.is_ok());
  const auto stream = mel->stream(audio);
  const Features full = mel->compute(audio);
  ASSERT_EQ(stream.total_frames(), full.frames);
  // Windows at the seeks a decoder might use, including one that runs past the end.
  for (int64_t seek : {int64_t{0}, int64_t{17}, int64_t{150}, ref.shape[1] - 5}) {
    const Features w = stream.window(seek);
    ASSERT_EQ(w.frames, 3000);
    float worst = 0;
    for (int64_t m = 0; m < 80; ++m)
      for (int64_t t = seek; t < ref.shape[1]; ++t)
        worst = std::max(worst, std::abs(w.at(m, t - seek) - ref.data[static_cast<size_t>(m * ref.shape[1] + t)]));
    EXPECT_LE(worst, kTolerance) << "seek " << seek;
    const Features expect = WhisperMelSpectrogram::window(full, seek);
    for (size_t i = 0; i < w.data.size(); ++i) ASSERT_NEAR(w.data[i], expect.data[i], 1e-6f) << "seek " << seek;
  }
}

class NemoGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(NemoGolden, MatchesNemoPreprocessor) {
  const std::string config_name = GetParam();
  const std::string json_path = kDir + "nemo_" + config_name + ".json";
  auto cfg = NemoMelConfig::parse(read_text(json_path), json_path);
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  auto mel = NemoMelSpectrogram::create(*cfg);
  ASSERT_TRUE(mel.is_ok()) << mel.status().to_string();
  for (const char* clip : kClips) {
    const std::vector<float> audio = load_clip(clip);
    const NpyArray ref = golden(std::string(clip) + "_nemo_" + config_name + ".npy");
    const Features f = mel->compute(audio);
    ASSERT_EQ(f.n_mels, ref.shape[0]) << clip;
    ASSERT_EQ(f.frames, ref.shape[1]) << clip;
    EXPECT_LE(max_error(f, ref, f.frames), kTolerance) << clip << " " << config_name;
    // The chunked path: blocks of frames from the stream agree with the reference too.
    const auto stream = mel->stream(audio);
    ASSERT_EQ(stream.output_frames(), f.frames);
    for (int64_t begin = 0; begin < f.frames; begin += 97) {
      const Features part = stream.frames(begin, 97);
      for (int64_t m = 0; m < f.n_mels; ++m)
        for (int64_t t = begin; t < std::min(begin + 97, f.frames); ++t)
          ASSERT_NEAR(part.at(m, t - begin), ref.data[static_cast<size_t>(m * f.frames + t)], kTolerance)
              << clip << " " << config_name << " frame " << t;
    }
  }
}

// A stream that keeps the statistics pass's log-mel gives the frames one that computes them again
// gives, bit for bit (each frame's STFT does not depend on the range it is computed in).
TEST(NemoMel, KeptLogMelGivesTheFramesComputedAgain) {
  auto cfg = NemoMelConfig::parse(read_text(kDir + "nemo_parakeet128.json"), "nemo_parakeet128.json");
  ASSERT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  auto mel = NemoMelSpectrogram::create(*cfg);
  ASSERT_TRUE(mel.is_ok());
  for (const char* clip : kClips) {
    const std::vector<float> audio = load_clip(clip);
    const auto kept = mel->stream(audio), again = mel->stream(audio, 0);
    ASSERT_EQ(kept.output_frames(), again.output_frames());
    for (int64_t begin : {int64_t{-3}, int64_t{0}, int64_t{41}, kept.valid_frames() - 60}) {
      const Features a = kept.frames(begin, 200), b = again.frames(begin, 200);
      ASSERT_EQ(a.data.size(), b.data.size());
      for (size_t i = 0; i < a.data.size(); ++i) ASSERT_EQ(a.data[i], b.data[i]) << clip << " from frame " << begin << ", value " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, NemoGolden, ::testing::Values("parakeet128", "defaults80", "variant64"));

TEST(NemoMelConfig, ParsesModelConfigYaml) {
  const std::string yaml =
      "sample_rate: 16000\n"
      "preprocessor:\n"
      "  _target_: nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor\n"
      "  sample_rate: 16000\n"
      "  normalize: per_feature\n"
      "  window_size: 0.025\n"
      "  window_stride: 0.01\n"
      "  window: hann\n"
      "  features: 80\n"
      "  n_fft: 512\n"
      "  log: true\n"
      "  frame_splicing: 1\n"
      "  dither: 1.0e-05\n"
      "  pad_to: 0\n"
      "  pad_value: 0.0\n"
      "spec_augment:\n"
      "  freq_masks: 2\n";
  auto c = NemoMelConfig::parse(yaml, "model_config.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->features, 80);
  EXPECT_EQ(c->win_length, 400);
  EXPECT_EQ(c->hop_length, 160);
  EXPECT_EQ(c->n_fft, 512);
  EXPECT_EQ(c->pad_to, 0);
  EXPECT_FLOAT_EQ(c->dither, 1e-5f);
  EXPECT_FLOAT_EQ(c->preemph, 0.97f);
  EXPECT_EQ(c->normalize, NemoMelConfig::Normalize::kPerFeature);
}

TEST(NemoMelConfig, RejectsWhatItDoesNotCompute) {
  for (const char* bad : {R"({"frame_splicing": 3})", R"({"exact_pad": true})", R"({"pad_to": "max"})",
                          R"({"normalize": "bogus"})", R"({"window_size": 0.0})", R"({"log_zero_guard_type": "mul"})",
                          R"({"n_window_size": "four hundred"})", R"({"log": "yes"})", R"({"window": 3})"}) {
    auto c = NemoMelConfig::parse(bad, "cfg.json");
    ASSERT_FALSE(c.is_ok()) << bad;
    EXPECT_NE(c.status().message().find("cfg.json"), std::string::npos) << c.status().message();
  }
  EXPECT_FALSE(NemoMelConfig::parse("preprocessor: [", "broken.yaml").is_ok());
  EXPECT_FALSE(NemoMelConfig::parse("{not json", "broken.json").is_ok());
}

TEST(StftMel, ThreadsShareOnePlanAndAgree) {
  const std::vector<float> audio = load_clip("speech_0930");
  const NpyArray ref = golden("speech_0930_nemo_parakeet128.npy");
  auto mel = NemoMelSpectrogram::create(NemoMelConfig::parakeet(128));
  ASSERT_TRUE(mel.is_ok());
  std::vector<float> worst(4, 1.0f);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < worst.size(); ++k)
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 5; ++rep) {
        const Features f = mel->compute(audio);
        worst[k] = max_error(f, ref, ref.shape[1]);
      }
    });
  for (auto& t : threads) t.join();
  for (float w : worst) EXPECT_LE(w, kTolerance);
}

TEST(WhisperMel, RejectsOtherMelCounts) {
  auto mel = WhisperMelSpectrogram::create({64});
  ASSERT_FALSE(mel.is_ok());
  EXPECT_NE(mel.status().message().find("64"), std::string::npos);
}

}  // namespace
}  // namespace vrun::preprocess
