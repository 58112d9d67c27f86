// Test audio made with libsndfile's encoders from an analytic signal, and the measurements that
// check a decoded signal against that signal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vrun::preprocess::testing {

struct Encoding {
  std::string name;  // e.g. "wav_pcm16", used in file names
  std::string extension;
  int format;        // libsndfile SF_FORMAT_* major | subtype
  bool lossy;
};
std::vector<Encoding> all_encodings();

// Two-channel test signal: left = A sin(2 pi f1 t) + B sin(2 pi f2 t), right = A sin(...) - B sin(...),
// so the mono average is A sin(2 pi f1 t) exactly. Mono files hold that average directly.
constexpr double kToneHz = 440.0, kCancelHz = 1000.0, kToneAmp = 0.4, kCancelAmp = 0.3;

// Writes `seconds` of the test signal; returns "" on success or libsndfile's error.
std::string write_test_signal(const std::string& path, const Encoding& enc, int rate, int channels, double seconds);

struct SineFit {
  double amplitude = 0;  // of the best-fitting sine at the given frequency
  double snr_db = 0;     // that sine's power over the residual's
};
// Least-squares fit of a sine of known frequency (free phase) to samples[skip, size - skip).
SineFit fit_sine(const std::vector<float>& samples, int rate, double freq, size_t skip);

std::string temp_path(const std::string& name);
std::vector<uint8_t> read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace vrun::preprocess::testing
