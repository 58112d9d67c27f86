#include "preprocess/mel_filterbank.h"

#include <algorithm>
#include <cmath>

namespace vrun::preprocess {
namespace {

// Slaney's scale: linear below 1 kHz, logarithmic above (librosa hz_to_mel / mel_to_hz).
constexpr double kFSp = 200.0 / 3.0;
constexpr double kMinLogHz = 1000.0;
constexpr double kMinLogMel = kMinLogHz / kFSp;
const double kLogStep = std::log(6.4) / 27.0;

double hz_to_mel(double hz, bool htk) {
  if (htk) return 2595.0 * std::log10(1.0 + hz / 700.0);
  return hz >= kMinLogHz ? kMinLogMel + std::log(hz / kMinLogHz) / kLogStep : hz / kFSp;
}

double mel_to_hz(double mel, bool htk) {
  if (htk) return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
  return mel >= kMinLogMel ? kMinLogHz * std::exp(kLogStep * (mel - kMinLogMel)) : kFSp * mel;
}

}  // namespace

Result<MelFilterbank> MelFilterbank::create(const MelFilterbankConfig& c) {
  const double f_max = c.f_max < 0 ? c.sample_rate / 2.0 : c.f_max;
  if (c.n_fft < 2 || c.n_mels < 1 || c.sample_rate <= 0 || c.f_min < 0 || f_max <= c.f_min)
    return err(ErrorCode::kInvalidArgument, "mel filterbank: invalid config (n_fft ", c.n_fft, ", n_mels ", c.n_mels,
               ", sample_rate ", c.sample_rate, ", f_min ", c.f_min, ", f_max ", f_max, ")");
  const int n_bins = c.n_fft / 2 + 1;
  std::vector<double> fft_hz(static_cast<size_t>(n_bins));
  for (int k = 0; k < n_bins; ++k) fft_hz[static_cast<size_t>(k)] = k * (c.sample_rate / 2.0) / (n_bins - 1);
  std::vector<double> mel_hz(static_cast<size_t>(c.n_mels + 2));
  const double mel_lo = hz_to_mel(c.f_min, c.htk), mel_hi = hz_to_mel(f_max, c.htk);
  for (int i = 0; i < c.n_mels + 2; ++i)
    mel_hz[static_cast<size_t>(i)] = mel_to_hz(mel_lo + (mel_hi - mel_lo) * i / (c.n_mels + 1), c.htk);

  MelFilterbank fb;
  fb.n_bins_ = n_bins;
  for (int m = 0; m < c.n_mels; ++m) {
    const double lo = mel_hz[m], mid = mel_hz[m + 1], hi = mel_hz[m + 2];
    const double enorm = c.slaney_norm ? 2.0 / (hi - lo) : 1.0;
    fb.offset_.push_back(static_cast<int>(fb.weights_.size()));
    int first = -1, count = 0;
    for (int k = 0; k < n_bins; ++k) {
      const double f = fft_hz[static_cast<size_t>(k)];
      // librosa keeps the weights in float32 and scales by enorm afterwards; rounding the same way
      // keeps us within an ulp of its matrix.
      const float w = static_cast<float>(std::max(0.0, std::min((f - lo) / (mid - lo), (hi - f) / (hi - mid))));
      if (w <= 0.0f) {
        if (first >= 0) break;
        continue;
      }
      if (first < 0) first = k;
      fb.weights_.push_back(static_cast<float>(static_cast<double>(w) * enorm));
      ++count;
    }
    fb.first_.push_back(std::max(first, 0));
    fb.count_.push_back(count);
  }
  return fb;
}

void MelFilterbank::apply(const float* power, float* mel, int64_t mel_stride) const {
  const int n = n_mels();
  for (int m = 0; m < n; ++m) {
    const float* w = weights_.data() + offset_[static_cast<size_t>(m)];
    const float* p = power + first_[static_cast<size_t>(m)];
    float acc = 0.0f;
    for (int k = 0, cnt = count_[static_cast<size_t>(m)]; k < cnt; ++k) acc += w[k] * p[k];
    mel[m * mel_stride] = acc;
  }
}

std::vector<float> MelFilterbank::dense() const {
  std::vector<float> d(static_cast<size_t>(n_mels()) * static_cast<size_t>(n_bins_), 0.0f);
  for (int m = 0; m < n_mels(); ++m)
    for (int k = 0; k < count_[static_cast<size_t>(m)]; ++k)
      d[static_cast<size_t>(m) * n_bins_ + first_[static_cast<size_t>(m)] + k] = weights_[static_cast<size_t>(offset_[static_cast<size_t>(m)] + k)];
  return d;
}

}  // namespace vrun::preprocess
