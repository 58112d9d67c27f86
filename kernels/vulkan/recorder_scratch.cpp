// Device memory a call takes as it records: scratch tensors (reused within the call once their op
// is recorded), the workgroup counters kernels meet at, and dense copies of strided views.
#include <algorithm>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/recorder.h"

namespace vrun::vulkan {

namespace {
// Scratch one capture may keep; a call needing more is not worth holding on to.
constexpr uint64_t kMaxCaptureScratch = 64ull << 20;
}  // namespace

Result<DeviceView> Recorder::counters(int64_t n) {
  constexpr uint64_t kCounters = kCounterWords;
  if (n <= 0 || static_cast<uint64_t>(n) > kCounters)
    return err(ErrorCode::kInternal, "vulkan: ", n, " workgroup counters asked for, at most ", kCounters);
  if (!counters_.valid()) {
    VRUN_ASSIGN_OR_RETURN(counters_,
                          ctx_.allocator().allocate(kCounters * 4, MemoryKind::kDevice, "workgroup counters"));
    VRUN_RETURN_IF_ERROR(begin_if_needed());
    const BufferRef r = counters_.ref();
    const Range all{r.buffer, r.offset, r.offset + kCounters * 4};
    hazard({}, std::span<const Range>(&all, 1));
    emit([r](VkCommandBuffer c) { vkCmdFillBuffer(c, r.buffer, r.offset, kCounters * 4, 0); });
    counters_next_ = 0;
  }
  // Wrapping around reuses counters that an earlier dispatch returned to zero; the hazard check
  // on the written binding orders the two.
  if (counters_next_ + static_cast<uint64_t>(n) > kCounters) counters_next_ = 0;
  DeviceView v = DeviceView::dense(counters_.ref(), DType::i32, Shape{n}, counters_next_ * 4);
  counters_next_ += static_cast<uint64_t>(n);
  return v;
}

Result<DeviceView> Recorder::scratch(DType dtype, const Shape& shape) {
  const uint64_t bytes = static_cast<uint64_t>(std::max<int64_t>(dtype_bytes(dtype, shape.numel()), 4));
  // The smallest memory that earlier ops of this call gave back and that fits.
  size_t best = scratch_free_.size();
  for (size_t i = 0; i < scratch_free_.size(); ++i)
    if (scratch_free_[i].size >= bytes && (best == scratch_free_.size() || scratch_free_[i].size < scratch_free_[best].size))
      best = i;
  if (best < scratch_free_.size()) {
    const BufferRef r = scratch_free_[best];
    scratch_free_[best] = scratch_free_.back();
    scratch_free_.pop_back();
    scratch_op_.push_back(r);
    stats_.call_scratch_reused++;
    return DeviceView::dense(r, dtype, shape);
  }
  const double t0 = stats_.on ? now_s() : 0;
  VRUN_ASSIGN_OR_RETURN(Buffer b, ctx_.allocator().allocate(bytes, MemoryKind::kDevice, "scratch tensor"));
  if (stats_.on) {
    stats_.call_scratch_s += now_s() - t0;
    stats_.call_scratch_new++;
    stats_.call_scratch_bytes += b.size();
  }
  DeviceView v = DeviceView::dense(b.ref(), dtype, shape);
  scratch_op_.push_back(b.ref());
  if (capture_) {
    capture_->keep_bytes += b.size();
    capture_->keep.push_back(std::move(b));
    if (capture_->keep_bytes > kMaxCaptureScratch) cancel_capture();
  } else {
    scratch_.push_back(std::move(b));
  }
  return v;
}

Result<DeviceView> Recorder::dense_view(const DeviceView& v) {
  if (v.is_contiguous()) return v;
  VRUN_ASSIGN_OR_RETURN(DeviceView d, scratch(v.dtype, v.shape));
  VRUN_RETURN_IF_ERROR(record_copy(v, d));
  return d;
}

Result<DeviceView> Recorder::rows_view(const DeviceView& v, int inner_dims) {
  // Inner dims must be dense; outer dims must collapse into one row stride.
  bool ok = true;
  int64_t acc = 1;
  const int r = v.shape.rank;
  for (int i = r - 1; i >= r - inner_dims && i >= 0; --i) {
    if (v.shape[i] != 1 && v.strides[i] != acc) ok = false;
    acc *= v.shape[i];
  }
  int64_t row_stride = -1;
  for (int i = r - inner_dims - 1; i >= 0 && ok; --i) {
    if (v.shape[i] == 1) continue;
    if (row_stride < 0) {
      row_stride = v.strides[i];
      acc = v.shape[i] * v.strides[i];
      continue;
    }
    if (v.strides[i] != acc) ok = false;
    acc *= v.shape[i];
  }
  if (ok) return v;
  return dense_view(v);
}

}  // namespace vrun::vulkan
