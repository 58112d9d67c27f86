// NeMo's AudioToMelSpectrogramPreprocessor (FilterbankFeatures) in eval mode, the front end of the
// Parakeet models. Every parameter comes from the model's `preprocessor` config; defaults are the
// class's own defaults, so a config that omits a key means what it means to NeMo.
//
// Definition: pre-emphasis, torch.stft with centre zero padding and a symmetric window of
// win_length centred in n_fft, |X|^mag_power, Slaney mel filterbank, log(x + guard) (or
// log(max(x, guard))), normalisation over the valid frames (samples // hop; per feature: mean and
// unbiased std + 1e-5), frames from the valid count on set to pad_value, then padded to a multiple
// of pad_to. Dither is a training-time augmentation and is not applied.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "preprocess/features.h"
#include "preprocess/stft_mel.h"
#include "runtime/base/status.h"

namespace vrun::preprocess {

struct NemoMelConfig {
  enum class Normalize { kNone, kPerFeature, kAllFeatures };
  enum class LogGuard { kAdd, kClamp };

  int sample_rate = 16000;
  int win_length = 320;  // n_window_size, or int(window_size * sample_rate)
  int hop_length = 160;  // n_window_stride, or int(window_stride * sample_rate)
  int n_fft = 512;       // config's n_fft, else the next power of two >= win_length
  WindowKind window = WindowKind::kHann;
  Normalize normalize = Normalize::kPerFeature;
  float preemph = 0.97f;  // 0 when the config says null
  int features = 64;
  double lowfreq = 0.0;
  double highfreq = 0.0;  // 0: sample_rate / 2
  bool log = true;
  LogGuard log_guard_type = LogGuard::kAdd;
  float log_guard = 1.0f / (1 << 24);
  float dither = 1e-5f;  // kept for information; eval mode does not dither
  int pad_to = 16;
  float pad_value = 0.0f;
  float mag_power = 2.0f;
  bool mel_norm_slaney = true;

  // Parses a preprocessor config: JSON (the `preprocessor` object, or a whole model config that
  // has one) or the `preprocessor:` block of a .nemo archive's model_config.yaml. Unknown keys are
  // ignored; values NeMo would reject, or features vrun does not compute (frame_splicing > 1,
  // exact_pad, pad_to "max"), are errors naming the key. `source` names the config in messages.
  static Result<NemoMelConfig> parse(const std::string& text, const std::string& source);
  // The preprocessor of the Parakeet TDT/CTC checkpoints (25 ms window, 10 ms hop, n_fft 512,
  // pad_to 0) with the given feature count (128 for parakeet-tdt-0.6b-v2/v3, 80 for older ones).
  static NemoMelConfig parakeet(int features);
};

class NemoMelSpectrogram {
 public:
  static Result<NemoMelSpectrogram> create(const NemoMelConfig& config);

  const NemoMelConfig& config() const { return config_; }
  int n_mels() const { return stft_->n_mels(); }

  // Frames the STFT makes (samples // hop + 1), frames holding data (samples // hop), and the
  // output's frame count after pad_to.
  int64_t stft_frames(int64_t n_samples) const { return n_samples / config_.hop_length + 1; }
  int64_t valid_frames(int64_t n_samples) const { return n_samples / config_.hop_length; }
  int64_t output_frames(int64_t n_samples) const;

  // [features, output_frames(samples)].
  Features compute(std::span<const float> samples) const;

  // Long audio without the whole spectrogram in memory: one pass gathers the normalisation
  // statistics, then any range of frames is computed on demand. Audio of at most keep_frames
  // valid frames (stream()'s argument) keeps the statistics pass's log-mel instead (as much
  // memory as the samples take), so its frames are only normalised, not computed again.
  class Stream {
   public:
    int64_t valid_frames() const { return valid_; }
    int64_t output_frames() const { return total_; }
    // Frames [begin, begin + count) of compute(samples); columns past the end are pad_value.
    Features frames(int64_t begin, int64_t count) const;

   private:
    friend class NemoMelSpectrogram;
    std::shared_ptr<const StftMel> stft_;
    NemoMelConfig config_;
    std::span<const float> samples_;
    int64_t valid_ = 0, total_ = 0;
    std::vector<double> mean_, inv_std_;  // one per feature, or one for all
    std::shared_ptr<const std::vector<float>> log_;  // kept log-mel [n_mels, valid], or null
  };
  static constexpr int64_t kKeepFrames = 32768;  // 327 s at a 10-ms hop: 16 MB of 128 mels
  // `samples` must outlive the stream.
  Stream stream(std::span<const float> samples, int64_t keep_frames = kKeepFrames) const;

 private:
  // Log-mel (before normalisation) of frames [begin, begin + count) into out (stride = count).
  static void log_frames(const StftMel& stft, const NemoMelConfig& c, std::span<const float> samples, int64_t begin,
                         int64_t count, float* out);
  // Per-feature (or global) mean and 1 / (std + 1e-5) from running sums over the valid frames.
  static void statistics(const NemoMelConfig& c, int n_mels, const std::vector<double>& shift,
                         const std::vector<double>& sum, const std::vector<double>& sum_sq, int64_t n,
                         std::vector<double>& mean, std::vector<double>& inv_std);

  NemoMelConfig config_;
  std::shared_ptr<const StftMel> stft_;
};

}  // namespace vrun::preprocess
