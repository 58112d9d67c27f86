#include "kernels/vulkan/ops.h"

#include <chrono>
#include <limits>

#include "kernels/vulkan/context.h"
#include "kernels/vulkan/pipelines.h"

namespace vrun::vulkan {

namespace {

// Kernels index with 32-bit integers.
bool fits_u32(const TensorDesc* d) {
  return !d || d->shape.numel() < static_cast<int64_t>(std::numeric_limits<int32_t>::max());
}
// Each op family's kernels: its support predicate and its recording function, side by side in
// ops_<family>.cpp.
struct FamilyKernels {
  SupportFn supports = nullptr;
  RecordFn record = nullptr;
};
FamilyKernels family_kernels(OpFamily f) {
  switch (f) {
    case OpFamily::unary:
    case OpFamily::binary: return {supports_elementwise, record_elementwise};
    case OpFamily::norm: return {supports_norm, record_norm};
    case OpFamily::reduce: return {supports_reduce, record_reduce};
    case OpFamily::linalg: return {supports_linalg, record_linalg};
    case OpFamily::attention: return {supports_attention, record_attention};
    case OpFamily::conv: return {supports_conv, record_conv};
    case OpFamily::rnn: return {supports_rnn, record_rnn};
    case OpFamily::data: return {supports_data, record_data};
    default: return {};
  }
}

}  // namespace

bool supports(const Context& ctx, OpKind op, const std::vector<const TensorDesc*>& inputs, const Attrs& attrs) {
  if (!ctx.kernels_usable()) return false;
  for (const TensorDesc* d : inputs)
    if (!fits_u32(d)) return false;
  if (inputs.empty() || !inputs[0]) return false;
  const SupportFn fn = family_kernels(op_schema(op).family).supports;
  return fn && fn(ctx, op, inputs, attrs);
}

std::string coopmat_kernel(const Context& ctx, const std::string& base) {
  const char* suffix = ctx.coopmat() == Context::CoopMat::kKhr  ? "_khr"
                       : ctx.coopmat() == Context::CoopMat::kNv ? "_nv"
                                                                 : nullptr;
  if (!suffix) return "";
  std::string name = base + suffix;
  return PipelineCache::has_kernel(name) ? name : "";
}

Status Recorder::record(OpKind op, const std::vector<DeviceView>& inputs, const std::vector<DeviceView>& outputs,
                        const Attrs& attrs) {
  if (replay_) {  // the capture holds this op's commands
    replay_ops_++;
    return Status::ok();
  }
  if (capture_) capture_ops_++;
  const size_t taken_before = scratch_op_.size();  // scratch taken outside any op stays taken
  const auto t0 = stats_.on ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  Status s = record_op(op, inputs, outputs, attrs);
  if (stats_.on) stats_.in_record_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The op is recorded: later ops of the call may take its scratch memory (see scratch()).
  scratch_free_.insert(scratch_free_.end(), scratch_op_.begin() + static_cast<std::ptrdiff_t>(taken_before),
                       scratch_op_.end());
  scratch_op_.resize(taken_before);
  return s;
}

Status Recorder::record_op(OpKind op, const std::vector<DeviceView>& inputs, const std::vector<DeviceView>& outputs,
                           const Attrs& attrs) {
  // Member scratch: this runs once per recorded node.
  std::vector<TensorDesc>& descs = record_descs_;
  std::vector<const TensorDesc*>& ptrs = record_ptrs_;
  descs.resize(inputs.size());
  ptrs.clear();
  for (size_t k = 0; k < inputs.size(); ++k) {
    descs[k] = {inputs[k].dtype, inputs[k].shape};
    ptrs.push_back(inputs[k].present() ? &descs[k] : nullptr);
  }
  if (!supports(ctx_, op, ptrs, attrs))
    return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op), " with input dtype ",
               inputs.empty() ? "(none)" : dtype_name(inputs[0].dtype), " on ", ctx_.info().name);
  // Outputs are dense, but for the input an op writes in place (any view of it).
  for (size_t k = 0; k < outputs.size(); ++k)
    if (!outputs[k].present() || (!outputs[k].is_contiguous() && !(k == 0 && op_schema(op).writes_input0())))
      return err(ErrorCode::kInvalidArgument, "vulkan: ", op_name(op), " output ", k, " must be a dense device tensor");
  const RecordFn record_fn = family_kernels(op_schema(op).family).record;
  if (!record_fn) return err(ErrorCode::kUnsupported, "vulkan: ", op_name(op), " has no kernel");
  return record_fn(*this, op, inputs, outputs, attrs);
}

Status Recorder::record_copy(const DeviceView& src, const DeviceView& dst) {
  if (src.shape != dst.shape)
    return err(ErrorCode::kInvalidArgument, "vulkan: copy from ", src.shape.str(), " to ", dst.shape.str());
  return record_eltwise(*this, OP_COPY, dst, &src, nullptr, nullptr);
}

}  // namespace vrun::vulkan
