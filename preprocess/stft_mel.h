// The part both feature definitions share: framing with centre padding, a window, a real FFT
// (FFTW single precision), a power spectrum and a mel filterbank, for any range of frames. Frame
// ranges are what make long audio cheap: a caller can compute a window of frames at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "preprocess/mel_filterbank.h"
#include "runtime/base/status.h"

namespace vrun::preprocess {

enum class CenterPad { kReflect, kZero };

struct StftConfig {
  int n_fft = 400;
  int hop = 160;
  std::vector<float> window;  // win_length <= n_fft values; centred in the n_fft frame as torch.stft does
  CenterPad pad = CenterPad::kReflect;
  float preemph = 0.0f;       // y[i] = x[i] - preemph * x[i - 1], y[0] = x[0]; 0 disables
  float mag_power = 2.0f;     // spectrum |X|^mag_power
};

// Periodic or symmetric windows as torch.*_window(n, periodic) make them.
enum class WindowKind { kHann, kHamming, kBlackman, kBartlett, kOnes };
std::vector<float> make_window(WindowKind kind, int length, bool periodic);

// fn over ranges covering [0, n), each at least `grain` long, on the process's thread pool (the
// calling thread alone when the span is short or another thread has the pool). Thread-safe.
void parallel_ranges(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

class StftMel {
 public:
  static Result<StftMel> create(StftConfig config, const MelFilterbankConfig& mel);

  const StftConfig& config() const { return config_; }
  int n_mels() const { return filterbank_.n_mels(); }
  const MelFilterbank& filterbank() const { return filterbank_; }

  // Frame t is centred on sample t * hop of the signal `samples` followed by `zero_tail` zeros
  // (the virtual length is samples.size() + zero_tail); the padding of n_fft / 2 at both ends of
  // that signal follows config().pad. Writes mel power (before any log) of frames
  // [begin, begin + count) to out[m * out_stride + (t - begin)]. Thread-safe.
  void compute(std::span<const float> samples, int64_t zero_tail, int64_t begin, int64_t count, float* out,
               int64_t out_stride) const;

 private:
  // compute() of frames [t0, t1) (output column t - begin).
  void compute_range(std::span<const float> samples, int64_t zero_tail, int64_t begin, int64_t t0, int64_t t1, float* out,
                     int64_t out_stride) const;
  StftConfig config_;
  std::vector<float> window_;  // n_fft long
  MelFilterbank filterbank_;
  void* plan_ = nullptr;       // fftwf_plan, shared process-wide per n_fft
};

}  // namespace vrun::preprocess
