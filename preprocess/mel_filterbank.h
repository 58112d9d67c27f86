// Triangular mel filterbanks as librosa.filters.mel defines them (both Whisper's mel_filters.npz
// and NeMo's FilterbankFeatures are made by it), stored sparsely: each filter covers few FFT bins.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::preprocess {

struct MelFilterbankConfig {
  int sample_rate = 16000;
  int n_fft = 400;
  int n_mels = 80;
  double f_min = 0.0;
  double f_max = -1.0;      // < 0: sample_rate / 2
  bool htk = false;         // false: Slaney's mel scale (librosa's default)
  bool slaney_norm = true;  // scale each filter to unit area (librosa norm="slaney")
};

class MelFilterbank {
 public:
  static Result<MelFilterbank> create(const MelFilterbankConfig& config);

  int n_mels() const { return static_cast<int>(first_.size()); }
  int n_bins() const { return n_bins_; }
  // mel[m] = sum_k W[m, k] * power[k] over the filter's nonzero bins.
  void apply(const float* power, float* mel, int64_t mel_stride) const;
  // The dense weight, [n_mels, n_bins], for inspection and tests.
  std::vector<float> dense() const;

 private:
  int n_bins_ = 0;
  std::vector<int> first_, count_;  // per filter: first nonzero bin and how many
  std::vector<float> weights_;      // concatenated nonzero weights
  std::vector<int> offset_;         // per filter: start in weights_
};

}  // namespace vrun::preprocess
