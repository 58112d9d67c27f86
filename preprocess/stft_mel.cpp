#include "preprocess/stft_mel.h"

#include "runtime/base/thread_pool.h"

#include <fftw3.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numbers>

namespace vrun::preprocess {
namespace {

// FFTW's planner is not thread-safe, execution with new arrays is: plans are made once per size
// under this lock and reused by every extractor and thread. Buffers come from fftwf_alloc_* so
// their alignment matches what the plan was made for. FFTW_ESTIMATE rather than FFTW_MEASURE:
// a measured plan depends on timings, so the rounding of the features would change from run to
// run and machine to machine; at these sizes the estimated plan is nearly as fast.
std::mutex& plan_mutex() {
  static std::mutex mu;
  return mu;
}

fftwf_plan plan_for(int n_fft) {
  std::lock_guard<std::mutex> lock(plan_mutex());
  static std::map<int, fftwf_plan> plans;
  auto it = plans.find(n_fft);
  if (it != plans.end()) return it->second;
  float* in = fftwf_alloc_real(static_cast<size_t>(n_fft));
  fftwf_complex* out = fftwf_alloc_complex(static_cast<size_t>(n_fft / 2 + 1));
  fftwf_plan p = fftwf_plan_dft_r2c_1d(n_fft, in, out, FFTW_ESTIMATE);
  fftwf_free(in);
  fftwf_free(out);
  plans[n_fft] = p;
  return p;
}

struct FftwFree {
  void operator()(void* p) const { fftwf_free(p); }
};

}  // namespace

std::vector<float> make_window(WindowKind kind, int length, bool periodic) {
  std::vector<float> w(static_cast<size_t>(length), 1.0f);
  if (kind == WindowKind::kOnes || length <= 1) return w;
  const double n = periodic ? length : length - 1;
  const double two_pi = 2.0 * std::numbers::pi;
  for (int i = 0; i < length; ++i) {
    double v = 1.0;
    switch (kind) {
      case WindowKind::kHann: v = 0.5 - 0.5 * std::cos(two_pi * i / n); break;
      case WindowKind::kHamming: v = 0.54 - 0.46 * std::cos(two_pi * i / n); break;
      case WindowKind::kBlackman: v = 0.42 - 0.5 * std::cos(two_pi * i / n) + 0.08 * std::cos(2 * two_pi * i / n); break;
      case WindowKind::kBartlett: v = 1.0 - std::abs(2.0 * i / n - 1.0); break;
      case WindowKind::kOnes: break;
    }
    w[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return w;
}

Result<StftMel> StftMel::create(StftConfig config, const MelFilterbankConfig& mel) {
  const int win = static_cast<int>(config.window.size());
  if (config.n_fft < 2 || config.hop < 1 || win < 1 || win > config.n_fft)
    return err(ErrorCode::kInvalidArgument, "stft: need n_fft >= 2, hop >= 1 and 1 <= window length <= n_fft; got n_fft ",
               config.n_fft, ", hop ", config.hop, ", window length ", win);
  if (mel.n_fft != config.n_fft)
    return err(ErrorCode::kInvalidArgument, "stft: mel filterbank n_fft ", mel.n_fft, " differs from the STFT's ", config.n_fft);
  StftMel s;
  VRUN_ASSIGN_OR_RETURN(s.filterbank_, MelFilterbank::create(mel));
  s.window_.assign(static_cast<size_t>(config.n_fft), 0.0f);
  const int left = (config.n_fft - win) / 2;
  for (int i = 0; i < win; ++i) s.window_[static_cast<size_t>(left + i)] = config.window[static_cast<size_t>(i)];
  s.config_ = std::move(config);
  s.plan_ = plan_for(s.config_.n_fft);
  return s;
}

void parallel_ranges(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  static std::mutex pool_mu;
  ThreadPool& pool = ThreadPool::global();
  std::unique_lock<std::mutex> lock(pool_mu, std::defer_lock);
  if (n < 2 * grain || pool.size() == 1 || !lock.try_lock()) {
    if (n > 0) fn(0, n);
    return;
  }
  pool.parallel_for(n, grain, fn);
}

void StftMel::compute(std::span<const float> samples, int64_t zero_tail, int64_t begin, int64_t count, float* out,
                      int64_t out_stride) const {
  // Frames are independent (each writes its own output column); each range has its own FFT buffers.
  parallel_ranges(count, 32, [&](int64_t a, int64_t b) { compute_range(samples, zero_tail, begin, begin + a, begin + b, out, out_stride); });
}

void StftMel::compute_range(std::span<const float> samples, int64_t zero_tail, int64_t begin, int64_t t0, int64_t t1,
                            float* out, int64_t out_stride) const {
  const int n_fft = config_.n_fft;
  const int n_bins = n_fft / 2 + 1;
  const int64_t n = static_cast<int64_t>(samples.size());
  const int64_t length = n + zero_tail;
  const int64_t half = n_fft / 2;
  const float a = config_.preemph;
  std::unique_ptr<float, FftwFree> frame(fftwf_alloc_real(static_cast<size_t>(n_fft)));
  std::unique_ptr<fftwf_complex, FftwFree> spec(fftwf_alloc_complex(static_cast<size_t>(n_bins)));
  std::vector<float> power(static_cast<size_t>(n_bins));
  const float* x = samples.data();

  // Pre-emphasis applies to the signal before padding, as NeMo does.
  auto emphasised = [&](int64_t i) -> float {
    if (i >= n) return 0.0f;
    return (a != 0.0f && i > 0) ? x[i] - a * x[i - 1] : x[i];
  };
  auto padded = [&](int64_t i) -> float {
    if (i < 0 || i >= length) {
      if (config_.pad == CenterPad::kZero) return 0.0f;
      // torch reflect padding: mirror about the first and last sample, not repeating them.
      if (i < 0) i = -i;
      if (i >= length) i = 2 * (length - 1) - i;
      if (i < 0 || i >= length) return 0.0f;
    }
    return emphasised(i);
  };

  for (int64_t t = t0; t < t1; ++t) {
    const int64_t start = t * config_.hop - half;
    float* f = frame.get();
    if (start >= 1 && start + n_fft <= n) {
      // Interior frame: read the signal directly.
      const float* src = x + start;
      if (a != 0.0f) {
        for (int j = 0; j < n_fft; ++j) f[j] = (src[j] - a * src[j - 1]) * window_[static_cast<size_t>(j)];
      } else {
        for (int j = 0; j < n_fft; ++j) f[j] = src[j] * window_[static_cast<size_t>(j)];
      }
    } else {
      for (int j = 0; j < n_fft; ++j) f[j] = padded(start + j) * window_[static_cast<size_t>(j)];
    }
    fftwf_execute_dft_r2c(static_cast<fftwf_plan>(plan_), f, spec.get());
    const fftwf_complex* c = spec.get();
    if (config_.mag_power == 2.0f) {
      for (int k = 0; k < n_bins; ++k) power[static_cast<size_t>(k)] = c[k][0] * c[k][0] + c[k][1] * c[k][1];
    } else if (config_.mag_power == 1.0f) {
      for (int k = 0; k < n_bins; ++k) power[static_cast<size_t>(k)] = std::sqrt(c[k][0] * c[k][0] + c[k][1] * c[k][1]);
    } else {
      const float p = config_.mag_power;
      for (int k = 0; k < n_bins; ++k)
        power[static_cast<size_t>(k)] = std::pow(std::sqrt(c[k][0] * c[k][0] + c[k][1] * c[k][1]), p);
    }
    filterbank_.apply(power.data(), out + (t - begin), out_stride);
  }
}

}  // namespace vrun::preprocess
