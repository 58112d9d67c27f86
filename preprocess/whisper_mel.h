// Whisper's log-mel spectrogram, as openai-whisper's audio.log_mel_spectrogram defines it: 16 kHz,
// n_fft 400, hop 160, periodic Hann, reflect centre padding, the last STFT frame dropped, Slaney
// mel filters (80 or 128), log10 clamped at 1e-10, floored at (max - 8), then (x + 4) / 4.
//
// The encoder reads 30-s windows of 3000 frames. Like openai-whisper's transcribe(), the audio is
// padded with 30 s of zeros before the STFT, so a window starting at any content frame is full of
// real frames (those past the speech hold the floor value), and the dynamic-range floor uses the
// maximum over the whole file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "preprocess/features.h"
#include "preprocess/stft_mel.h"
#include "runtime/base/status.h"

namespace vrun::preprocess {

struct WhisperMelConfig {
  int n_mels = 80;  // 80 for most checkpoints, 128 for large-v3 and turbo
  static constexpr int kSampleRate = 16000;
  static constexpr int kNfft = 400;
  static constexpr int kHop = 160;
  static constexpr int kWindowFrames = 3000;                   // frames per encoder window (30 s)
  static constexpr int64_t kWindowSamples = 30 * kSampleRate;  // the zero padding transcribe() adds
};

class WhisperMelSpectrogram {
 public:
  static Result<WhisperMelSpectrogram> create(const WhisperMelConfig& config = {});

  int n_mels() const { return stft_->n_mels(); }

  // log_mel_spectrogram(audio, n_mels, padding): [n_mels, (samples + padding) / 160]. The default
  // padding is transcribe()'s 30 s; 0 gives log_mel_spectrogram(audio)'s frames.
  Features compute(std::span<const float> samples, int64_t padding = WhisperMelConfig::kWindowSamples) const;

  // Frames that hold speech (transcribe()'s content_frames): samples / 160.
  static int64_t content_frames(int64_t n_samples) { return n_samples / WhisperMelConfig::kHop; }
  // The encoder input starting at frame `seek` of full features: 3000 frames, zero-filled past the
  // end as whisper's pad_or_trim does.
  static Features window(const Features& full, int64_t seek) {
    return full.slice_frames(seek, WhisperMelConfig::kWindowFrames, 0.0f);
  }

  // Long audio without the whole spectrogram in memory: one pass finds the global maximum, then
  // any window of frames is computed on demand (about twice the work of compute()).
  class Stream {
   public:
    int64_t total_frames() const { return total_frames_; }
    int64_t content_frames() const { return WhisperMelSpectrogram::content_frames(static_cast<int64_t>(samples_.size())); }
    // Frames [begin, begin + count) of compute(samples, padding); columns past the end are 0.
    Features frames(int64_t begin, int64_t count) const;
    Features window(int64_t seek) const { return frames(seek, WhisperMelConfig::kWindowFrames); }

   private:
    friend class WhisperMelSpectrogram;
    std::shared_ptr<const StftMel> stft_;
    std::span<const float> samples_;
    int64_t padding_ = 0, total_frames_ = 0;
    float floor_ = 0;  // max - 8 over the whole file
  };
  // `samples` must outlive the stream.
  Stream stream(std::span<const float> samples, int64_t padding = WhisperMelConfig::kWindowSamples) const;

 private:
  // log10(clamp(mel power, 1e-10)) of frames [begin, begin + count) into out (stride = count).
  static void log_frames(const StftMel& stft, std::span<const float> samples, int64_t padding, int64_t begin,
                         int64_t count, float* out);
  static void finish(float* data, size_t n, float floor_value);

  std::shared_ptr<const StftMel> stft_;
};

}  // namespace vrun::preprocess
