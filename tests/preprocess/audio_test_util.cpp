#include "tests/preprocess/audio_test_util.h"

#include <sndfile.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

namespace vrun::preprocess::testing {

std::vector<Encoding> all_encodings() {
  return {
      {"wav_pcm16", "wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, false},
      {"wav_pcm24", "wav", SF_FORMAT_WAV | SF_FORMAT_PCM_24, false},
      {"wav_pcm32", "wav", SF_FORMAT_WAV | SF_FORMAT_PCM_32, false},
      {"wav_float", "wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, false},
      {"flac16", "flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, false},
      {"flac24", "flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_24, false},
      {"ogg_vorbis", "ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, true},
      {"mp3", "mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, true},
  };
}

std::string write_test_signal(const std::string& path, const Encoding& enc, int rate, int channels, double seconds) {
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = enc.format;
  SNDFILE* sf = sf_open(path.c_str(), SFM_WRITE, &info);
  if (!sf) return sf_strerror(nullptr);
  if (enc.lossy) {
    double quality = 0.9;  // keeps the codecs' error well under the thresholds the tests use
    sf_command(sf, SFC_SET_VBR_ENCODING_QUALITY, &quality, sizeof(quality));
  }
  const int64_t frames = static_cast<int64_t>(seconds * rate);
  std::vector<float> data(static_cast<size_t>(frames * channels));
  const double w1 = 2 * std::numbers::pi * kToneHz / rate, w2 = 2 * std::numbers::pi * kCancelHz / rate;
  for (int64_t i = 0; i < frames; ++i) {
    const double tone = kToneAmp * std::sin(w1 * static_cast<double>(i));
    const double other = kCancelAmp * std::sin(w2 * static_cast<double>(i));
    if (channels == 1) {
      data[static_cast<size_t>(i)] = static_cast<float>(tone);
    } else {
      data[static_cast<size_t>(i * channels)] = static_cast<float>(tone + other);
      data[static_cast<size_t>(i * channels + 1)] = static_cast<float>(tone - other);
    }
  }
  const sf_count_t wrote = sf_writef_float(sf, data.data(), frames);
  std::string error = wrote == frames ? "" : sf_strerror(sf);
  sf_close(sf);
  return error;
}

SineFit fit_sine(const std::vector<float>& samples, int rate, double freq, size_t skip) {
  SineFit fit;
  if (samples.size() <= 2 * skip + 16) return fit;
  const size_t begin = skip, end = samples.size() - skip;
  const double w = 2 * std::numbers::pi * freq / rate;
  // Normal equations for x ~ a sin + b cos (2x2, the basis is not exactly orthogonal over the span).
  double ss = 0, cc = 0, sc = 0, xs = 0, xc = 0;
  for (size_t i = begin; i < end; ++i) {
    const double s = std::sin(w * static_cast<double>(i)), c = std::cos(w * static_cast<double>(i));
    ss += s * s;
    cc += c * c;
    sc += s * c;
    xs += samples[i] * s;
    xc += samples[i] * c;
  }
  const double det = ss * cc - sc * sc;
  const double a = (xs * cc - xc * sc) / det, b = (xc * ss - xs * sc) / det;
  double signal = 0, residual = 0;
  for (size_t i = begin; i < end; ++i) {
    const double model = a * std::sin(w * static_cast<double>(i)) + b * std::cos(w * static_cast<double>(i));
    signal += model * model;
    residual += (samples[i] - model) * (samples[i] - model);
  }
  fit.amplitude = std::hypot(a, b);
  fit.snr_db = 10 * std::log10(signal / std::max(residual, 1e-30));
  return fit;
}

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("vrun_audio_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace vrun::preprocess::testing
