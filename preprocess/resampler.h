// Sample-rate conversion with libsoxr at its high-quality setting (linear phase, ~-100 dB
// aliasing), usable on a stream: feed blocks with process(), then flush() once at the end.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::preprocess {

class Resampler {
 public:
  // Mono float32 from in_rate to out_rate (Hz, both > 0).
  static Result<Resampler> create(double in_rate, double out_rate);
  Resampler(Resampler&&) noexcept;
  Resampler& operator=(Resampler&&) noexcept;
  ~Resampler();

  // Appends the output that `input` makes available to `out` (soxr keeps a filter's delay inside).
  Status process(std::span<const float> input, std::vector<float>& out);
  // Appends the remaining output; the resampler is spent afterwards.
  Status flush(std::vector<float>& out);

  double in_rate() const { return in_rate_; }
  double out_rate() const { return out_rate_; }

  // One-shot conversion of a whole signal.
  static Result<std::vector<float>> resample(std::span<const float> input, double in_rate, double out_rate);

 private:
  Resampler(void* handle, double in_rate, double out_rate) : handle_(handle), in_rate_(in_rate), out_rate_(out_rate) {}
  Status run(const float* in, size_t in_len, std::vector<float>& out);
  void* handle_ = nullptr;  // soxr_t
  double in_rate_ = 0, out_rate_ = 0;
};

}  // namespace vrun::preprocess
