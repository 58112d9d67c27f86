// NeMo preprocessor features of the Parakeet golden clips (tests/data/parakeet/goldens.json, made by
// tests/reference/make_parakeet_goldens.py with NeMo 3.0) against vrun's NemoMelSpectrogram, from the
// preprocessor config the goldens carry: whole matrices for two clips, the first frames, the last
// valid frame and per-mel means for all seven (0.62 s to 27 s).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "preprocess/audio_loader.h"
#include "preprocess/features.h"
#include "preprocess/nemo_mel.h"

namespace vrun::preprocess {
namespace {

using nlohmann::json;

const std::string kData = std::string(VRUN_TEST_DATA) + "/";
constexpr double kTolerance = 1e-4;

const json& goldens() {
  static const json g = [] {
    std::ifstream in(kData + "parakeet/goldens.json", std::ios::binary);
    return json::parse(in);
  }();
  return g;
}

NemoMelSpectrogram make_mel() {
  auto cfg = NemoMelConfig::parse(goldens()["features"]["preprocessor"].dump(), "goldens.json preprocessor");
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  auto mel = NemoMelSpectrogram::create(*cfg);
  EXPECT_TRUE(mel.is_ok()) << mel.status().to_string();
  return std::move(mel).value();
}

Features features_of(const NemoMelSpectrogram& mel, const std::string& clip) {
  const json& c = goldens()["clips"][clip];
  auto audio = load_audio(kData + c["path"].get<std::string>());
  EXPECT_TRUE(audio.is_ok()) << audio.status().to_string();
  if (!audio) return {};
  EXPECT_EQ(static_cast<int64_t>(audio->samples.size()), c["samples"].get<int64_t>()) << clip;
  return mel.compute(audio->samples);
}

TEST(ParakeetFeaturesGolden, FirstFramesLastFrameAndMeansOfEveryClip) {
  const NemoMelSpectrogram mel = make_mel();
  ASSERT_EQ(goldens()["features"]["clips"].size(), 7u);
  for (const auto& [clip, g] : goldens()["features"]["clips"].items()) {
    SCOPED_TRACE(clip);
    const Features f = features_of(mel, clip);
    ASSERT_EQ(f.n_mels, g["shape"][0].get<int64_t>());
    ASSERT_EQ(f.frames, g["shape"][1].get<int64_t>());
    const int64_t valid = g["valid_frames"].get<int64_t>();
    ASSERT_EQ(mel.valid_frames(static_cast<int64_t>(goldens()["clips"][clip]["samples"])), valid);
    double worst = 0;
    const json& first = g["first_frames"];
    for (size_t t = 0; t < first.size(); ++t)
      for (int64_t m = 0; m < f.n_mels; ++m)
        worst = std::max(worst, std::abs(f.at(m, static_cast<int64_t>(t)) - first[t][m].get<double>()));
    for (int64_t m = 0; m < f.n_mels; ++m)
      worst = std::max(worst, std::abs(f.at(m, valid - 1) - g["last_valid_frame"][m].get<double>()));
    EXPECT_LT(worst, kTolerance);
    // Means over the valid frames cover every frame of the long clip in one number per mel.
    double mean_err = 0, abs_sum = 0;
    for (int64_t m = 0; m < f.n_mels; ++m) {
      double s = 0;
      for (int64_t t = 0; t < valid; ++t) {
        s += f.at(m, t);
        abs_sum += std::abs(f.at(m, t));
      }
      mean_err = std::max(mean_err, std::abs(s / static_cast<double>(valid) - g["mean_per_mel"][m].get<double>()));
    }
    EXPECT_LT(mean_err, 1e-5);
    EXPECT_NEAR(abs_sum, g["abs_sum"].get<double>(), 1e-6 * g["abs_sum"].get<double>());
    for (int64_t t = valid; t < f.frames; ++t)
      for (int64_t m = 0; m < f.n_mels; ++m) ASSERT_EQ(f.at(m, t), 0.0f) << "padding frame " << t;
  }
}

TEST(ParakeetFeaturesGolden, WholeMatricesOfTwoClips) {
  const NemoMelSpectrogram mel = make_mel();
  int checked = 0;
  for (const auto& [clip, g] : goldens()["features"]["clips"].items()) {
    if (!g.contains("npy")) continue;
    SCOPED_TRACE(clip);
    auto ref = read_npy(kData + "parakeet/" + g["npy"].get<std::string>());
    ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
    const Features f = features_of(mel, clip);
    ASSERT_EQ(ref->shape, (std::vector<int64_t>{f.n_mels, f.frames}));
    double worst = 0, peak = 0;
    for (size_t i = 0; i < f.data.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(f.data[i] - ref->data[i])));
      peak = std::max(peak, static_cast<double>(std::abs(ref->data[i])));
    }
    EXPECT_GT(peak, 1.0);
    EXPECT_LT(worst, kTolerance);
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace vrun::preprocess
