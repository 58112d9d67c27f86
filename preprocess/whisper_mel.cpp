#include "preprocess/whisper_mel.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vrun::preprocess {
namespace {
constexpr int64_t kBlockFrames = 1024;  // frames computed per block in the streaming passes
}

Result<WhisperMelSpectrogram> WhisperMelSpectrogram::create(const WhisperMelConfig& config) {
  if (config.n_mels != 80 && config.n_mels != 128)
    return err(ErrorCode::kInvalidArgument, "whisper mel: n_mels must be 80 or 128 (the checkpoints' filterbanks), got ",
               config.n_mels);
  StftConfig stft;
  stft.n_fft = WhisperMelConfig::kNfft;
  stft.hop = WhisperMelConfig::kHop;
  stft.window = make_window(WindowKind::kHann, WhisperMelConfig::kNfft, /*periodic=*/true);
  stft.pad = CenterPad::kReflect;
  MelFilterbankConfig mel;
  mel.sample_rate = WhisperMelConfig::kSampleRate;
  mel.n_fft = WhisperMelConfig::kNfft;
  mel.n_mels = config.n_mels;
  VRUN_ASSIGN_OR_RETURN(StftMel s, StftMel::create(std::move(stft), mel));
  WhisperMelSpectrogram w;
  w.stft_ = std::make_shared<const StftMel>(std::move(s));
  return w;
}

void WhisperMelSpectrogram::log_frames(const StftMel& stft, std::span<const float> samples, int64_t padding,
                                       int64_t begin, int64_t count, float* out) {
  stft.compute(samples, padding, begin, count, out, count);
  const size_t n = static_cast<size_t>(count) * static_cast<size_t>(stft.n_mels());
  for (size_t i = 0; i < n; ++i) out[i] = std::log10(std::max(out[i], 1e-10f));
}

void WhisperMelSpectrogram::finish(float* data, size_t n, float floor_value) {
  for (size_t i = 0; i < n; ++i) data[i] = (std::max(data[i], floor_value) + 4.0f) / 4.0f;
}

Features WhisperMelSpectrogram::compute(std::span<const float> samples, int64_t padding) const {
  const int64_t total = (static_cast<int64_t>(samples.size()) + padding) / WhisperMelConfig::kHop;
  Features f(n_mels(), total);
  if (total == 0) return f;
  log_frames(*stft_, samples, padding, 0, total, f.data.data());
  const float max_value = *std::max_element(f.data.begin(), f.data.end());
  finish(f.data.data(), f.data.size(), max_value - 8.0f);
  return f;
}

WhisperMelSpectrogram::Stream WhisperMelSpectrogram::stream(std::span<const float> samples, int64_t padding) const {
  Stream s;
  s.stft_ = stft_;
  s.samples_ = samples;
  s.padding_ = padding;
  s.total_frames_ = (static_cast<int64_t>(samples.size()) + padding) / WhisperMelConfig::kHop;
  float max_value = -std::numeric_limits<float>::infinity();
  std::vector<float> block(static_cast<size_t>(kBlockFrames * n_mels()));
  for (int64_t b = 0; b < s.total_frames_; b += kBlockFrames) {
    const int64_t count = std::min(kBlockFrames, s.total_frames_ - b);
    log_frames(*stft_, samples, padding, b, count, block.data());
    max_value = std::max(max_value, *std::max_element(block.begin(), block.begin() + count * n_mels()));
  }
  s.floor_ = max_value - 8.0f;
  return s;
}

Features WhisperMelSpectrogram::Stream::frames(int64_t begin, int64_t count) const {
  Features out(stft_->n_mels(), count, 0.0f);
  const int64_t lo = std::clamp<int64_t>(begin, 0, total_frames_);
  const int64_t hi = std::clamp<int64_t>(begin + count, 0, total_frames_);
  if (hi <= lo) return out;
  Features valid(stft_->n_mels(), hi - lo);
  log_frames(*stft_, samples_, padding_, lo, hi - lo, valid.data.data());
  finish(valid.data.data(), valid.data.size(), floor_);
  for (int64_t m = 0; m < out.n_mels; ++m)
    std::copy_n(&valid.at(m, 0), hi - lo, &out.at(m, lo - begin));
  return out;
}

}  // namespace vrun::preprocess
