#include "runtime/backends/vulkan/ops.h"

#include <chrono>
#include <limits>

#include "runtime/backends/vulkan/context.h"
#include "runtime/backends/vulkan/pipelines.h"

namespace vrun::vulkan {

namespace {

bool is_act(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool is_weight(DType t) { return is_act(t) || t == DType::q8_0 || t == DType::q4_0 || t == DType::q4_1; }
bool is_index(DType t) { return t == DType::i32 || t == DType::i64; }
// Plain dtypes the raw copy kernel moves bit-exactly.
bool is_copyable(DType t) { return !is_quantized(t) && t != DType::f64; }
// Kernels index with 32-bit integers.
bool fits_u32(const TensorDesc* d) {
  return !d || d->shape.numel() < static_cast<int64_t>(std::numeric_limits<int32_t>::max());
}
const TensorDesc* in(const std::vector<const TensorDesc*>& v, size_t k) { return k < v.size() ? v[k] : nullptr; }

}  // namespace

bool supports(const Context& ctx, OpKind op, const std::vector<const TensorDesc*>& inputs, const Attrs& attrs) {
  if (!ctx.kernels_usable()) return false;
  for (const TensorDesc* d : inputs)
    if (!fits_u32(d)) return false;
  const TensorDesc* x = in(inputs, 0);
  if (!x) return false;
  const OpSchema& s = op_schema(op);
  switch (s.family) {
    case OpFamily::unary:
      if (op == OpKind::cast) {
        auto to = dtype_from_name(attrs.s("dtype"));
        return to && (is_act(*to) || *to == DType::i32) && (is_act(x->dtype) || x->dtype == DType::i32 || x->dtype == DType::bool_);
      }
      return is_act(x->dtype);
    case OpFamily::binary:
      if (op == OpKind::where) {
        const TensorDesc *a = in(inputs, 1), *b = in(inputs, 2);
        return a && b && (x->dtype == DType::bool_ || x->dtype == DType::u8) && is_act(a->dtype) && a->dtype == b->dtype;
      }
      return in(inputs, 1) && is_act(x->dtype) && in(inputs, 1)->dtype == x->dtype;
    case OpFamily::norm:
      if (op == OpKind::batch_norm) return false;
      for (size_t k = 1; k < inputs.size(); ++k)
        if (inputs[k] && !is_act(inputs[k]->dtype)) return false;
      return is_act(x->dtype);
    case OpFamily::reduce:
      if (op == OpKind::softmax || op == OpKind::log_softmax || op == OpKind::argmax) return is_act(x->dtype);
      return false;
    case OpFamily::linalg:
      if (op == OpKind::linear) {
        const TensorDesc *w = in(inputs, 1), *b = in(inputs, 2), *r = in(inputs, 3), *g = in(inputs, 4), *nb = in(inputs, 5);
        return w && is_act(x->dtype) && is_weight(w->dtype) && (!b || is_act(b->dtype)) && (!r || is_act(r->dtype)) &&
               (!g || is_act(g->dtype)) && (!nb || is_act(nb->dtype));
      }
      return in(inputs, 1) && is_act(x->dtype) && is_act(in(inputs, 1)->dtype);
    case OpFamily::attention:
      if (op == OpKind::sdpa) {
        const TensorDesc *k = in(inputs, 1), *v = in(inputs, 2), *m = in(inputs, 3);
        if (!k || !v || !is_act(x->dtype) || !is_act(k->dtype) || !is_act(v->dtype)) return false;
        if (x->shape.rank != 4 || x->shape[3] > 256 || v->shape.rank != 4 || v->shape[3] > 256) return false;
        if (attrs.i("causal") && x->shape[2] > k->shape[2]) return false;
        if (!attrs.ints("window").empty() && (in(inputs, 4) || !sdpa_window_fits(attrs.ints("window"))))
          return false;
        return !m || is_act(m->dtype) || m->dtype == DType::bool_ || m->dtype == DType::u8;
      }
      if (op == OpKind::rope) {
        const TensorDesc* f = in(inputs, 1);
        return f && is_act(x->dtype) && is_act(f->dtype) && (attrs.s("mode") == "half" || attrs.s("mode") == "interleaved");
      }
      return false;
    case OpFamily::conv: {
      if (op == OpKind::max_pool2d) return false;  // the CPU kernel runs it
      const TensorDesc *w = in(inputs, 1), *b = in(inputs, 2);
      return w && is_act(x->dtype) && is_act(w->dtype) && (!b || is_act(b->dtype));
    }
    case OpFamily::rnn: {
      if (op == OpKind::tdt_greedy)
        return in(inputs, 3) && is_act(in(inputs, 3)->dtype) && tdt_greedy_fits(attrs) && tdt_kernel_wanted(ctx);
      // lstm: x, h0, c0, w_ih, w_hh, b_ih?, b_hh?
      const TensorDesc *h0 = in(inputs, 1), *c0 = in(inputs, 2), *w_ih = in(inputs, 3), *w_hh = in(inputs, 4);
      const TensorDesc *b_ih = in(inputs, 5), *b_hh = in(inputs, 6);
      return op == OpKind::lstm && is_act(x->dtype) && h0 && c0 && is_act(h0->dtype) && is_act(c0->dtype) && w_ih &&
             is_act(w_ih->dtype) && w_hh && is_act(w_hh->dtype) && (!b_ih || is_act(b_ih->dtype)) &&
             (!b_hh || is_act(b_hh->dtype));
    }
    case OpFamily::data:
      switch (op) {
        case OpKind::copy: return is_copyable(x->dtype);
        case OpKind::concat:
          for (const TensorDesc* d : inputs)
            if (!d || d->dtype != x->dtype || !is_copyable(d->dtype)) return false;
          return true;
        case OpKind::slice_update:
          if (in(inputs, 3))  // rotating as it writes: float state and src
            return in(inputs, 1) && is_act(x->dtype) && is_act(in(inputs, 1)->dtype) && in(inputs, 3)->dtype == DType::f32;
          return in(inputs, 1) && is_copyable(x->dtype) &&
                 (in(inputs, 1)->dtype == x->dtype || (is_act(x->dtype) && is_act(in(inputs, 1)->dtype)));
        case OpKind::glu: return is_act(x->dtype) && (attrs.s("act") == "sigmoid" || attrs.s("act") == "silu");
        case OpKind::embedding: {
          const TensorDesc* ids = in(inputs, 1);
          auto to = dtype_from_name(attrs.s("dtype"));
          return ids && is_index(ids->dtype) && is_weight(x->dtype) && to && is_act(*to);
        }
        default: return false;
      }
    default: return false;
  }
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
  for (size_t k = 0; k < outputs.size(); ++k)
    if (!outputs[k].present() || !outputs[k].is_contiguous())
      return err(ErrorCode::kInvalidArgument, "vulkan: ", op_name(op), " output ", k, " must be a dense device tensor");
  switch (op_schema(op).family) {
    case OpFamily::unary:
    case OpFamily::binary: return record_elementwise(*this, op, inputs, outputs, attrs);
    case OpFamily::norm:
    case OpFamily::reduce: return record_norm(*this, op, inputs, outputs, attrs);
    case OpFamily::linalg: return record_linalg(*this, op, inputs, outputs, attrs);
    case OpFamily::attention: return record_attention(*this, op, inputs, outputs, attrs);
    case OpFamily::conv: return record_conv(*this, op, inputs, outputs, attrs);
    case OpFamily::rnn: return record_rnn(*this, op, inputs, outputs, attrs);
    case OpFamily::data: return record_data(*this, op, inputs, outputs, attrs);
    default: return err(ErrorCode::kUnsupported, "vulkan: ", op_name(op), " has no kernel");
  }
}

Status Recorder::record_copy(const DeviceView& src, const DeviceView& dst) {
  if (src.shape != dst.shape)
    return err(ErrorCode::kInvalidArgument, "vulkan: copy from ", src.shape.str(), " to ", dst.shape.str());
  return record_eltwise(*this, kOpCopy, dst, &src, nullptr, nullptr);
}

}  // namespace vrun::vulkan
