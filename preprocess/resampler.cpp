#include "preprocess/resampler.h"

#include <soxr.h>

#include <cmath>

namespace vrun::preprocess {

Result<Resampler> Resampler::create(double in_rate, double out_rate) {
  if (!(in_rate > 0) || !(out_rate > 0) || !std::isfinite(in_rate) || !std::isfinite(out_rate))
    return err(ErrorCode::kInvalidArgument, "resampler: rates must be positive, got ", in_rate, " -> ", out_rate, " Hz");
  soxr_error_t error = nullptr;
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  soxr_t handle = soxr_create(in_rate, out_rate, 1, &error, &io, &quality, nullptr);
  if (error || !handle) return err(ErrorCode::kInternal, "resampler: soxr_create failed: ", error ? error : "unknown");
  return Resampler(handle, in_rate, out_rate);
}

Resampler::Resampler(Resampler&& o) noexcept : handle_(o.handle_), in_rate_(o.in_rate_), out_rate_(o.out_rate_) {
  o.handle_ = nullptr;
}

Resampler& Resampler::operator=(Resampler&& o) noexcept {
  if (this != &o) {
    if (handle_) soxr_delete(static_cast<soxr_t>(handle_));
    handle_ = o.handle_;
    in_rate_ = o.in_rate_;
    out_rate_ = o.out_rate_;
    o.handle_ = nullptr;
  }
  return *this;
}

Resampler::~Resampler() {
  if (handle_) soxr_delete(static_cast<soxr_t>(handle_));
}

Status Resampler::run(const float* in, size_t in_len, std::vector<float>& out) {
  if (!handle_) return err(ErrorCode::kInternal, "resampler: used after flush or move");
  soxr_t s = static_cast<soxr_t>(handle_);
  const double ratio = out_rate_ / in_rate_;
  size_t consumed_total = 0;
  // Loop because soxr may not take all input or produce all output in one call.
  for (;;) {
    const size_t remaining = in ? in_len - consumed_total : 0;
    const size_t room = static_cast<size_t>(std::ceil(static_cast<double>(remaining) * ratio)) + 1024;
    const size_t old = out.size();
    out.resize(old + room);
    size_t idone = 0, odone = 0;
    soxr_error_t e = soxr_process(s, in ? in + consumed_total : nullptr, remaining, &idone, out.data() + old, room, &odone);
    out.resize(old + odone);
    if (e) return err(ErrorCode::kInternal, "resampler: soxr_process failed: ", e);
    consumed_total += idone;
    if (in) {
      if (consumed_total >= in_len && odone < room) break;
    } else if (odone == 0) {
      break;
    }
  }
  return Status::ok();
}

Status Resampler::process(std::span<const float> input, std::vector<float>& out) {
  if (input.empty()) return Status::ok();
  return run(input.data(), input.size(), out);
}

Status Resampler::flush(std::vector<float>& out) {
  VRUN_RETURN_IF_ERROR(run(nullptr, 0, out));
  soxr_delete(static_cast<soxr_t>(handle_));
  handle_ = nullptr;
  return Status::ok();
}

Result<std::vector<float>> Resampler::resample(std::span<const float> input, double in_rate, double out_rate) {
  VRUN_ASSIGN_OR_RETURN(Resampler r, create(in_rate, out_rate));
  std::vector<float> out;
  out.reserve(static_cast<size_t>(static_cast<double>(input.size()) * out_rate / in_rate) + 16);
  VRUN_RETURN_IF_ERROR(r.process(input, out));
  VRUN_RETURN_IF_ERROR(r.flush(out));
  return out;
}

}  // namespace vrun::preprocess
