#include "kernels/ops/shape_infer.h"

#include <string>

#include "kernels/ops/views.h"

namespace vrun {

Status check_device_scalar(const TensorDesc* t, const char* op, const char* name) {
  if (t && (t->dtype != DType::i32 || t->shape.numel() != 1))
    return err(ErrorCode::kInvalidArgument, op, ": ", name, " must be i32 with one element, got ", dtype_name(t->dtype),
               " ", t->shape.str());
  return Status::ok();
}

Status check_device_positions(const TensorDesc* t, const char* op, const char* name, int64_t per, const char* what) {
  if (t && (t->dtype != DType::i32 || t->shape.rank > 1 || (t->shape.numel() != 1 && t->shape.numel() != per)))
    return err(ErrorCode::kInvalidArgument, op, ": ", name, " must be i32 with one element or one per ", what, " (", per,
               "), got ", dtype_name(t->dtype), " ", t->shape.str());
  return Status::ok();
}

Status check_rope_frequencies(const char* op, const char* mode_attr, const Attrs& attrs, const TensorDesc& inv_freq,
                              int64_t rotary_dim) {
  const std::string& mode = attrs.s(mode_attr);
  if (mode != "half" && mode != "interleaved")
    return err(ErrorCode::kInvalidArgument, op, ": ", mode_attr, " must be half or interleaved, got '", mode, "'");
  if (inv_freq.dtype != DType::f32 || inv_freq.shape.rank != 1 || inv_freq.shape[0] != rotary_dim / 2)
    return err(ErrorCode::kInvalidArgument, op, ": inv_freq must be f32 [", rotary_dim / 2, "], got ",
               dtype_name(inv_freq.dtype), " ", inv_freq.shape.str());
  return Status::ok();
}

Status infer_shapes(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                    std::vector<TensorDesc>* out) {
  const OpSchema& sch = op_schema(op);
  out->clear();
  switch (sch.family) {
    case OpFamily::unary:
    case OpFamily::binary: return infer_shapes_elementwise(op, in, attrs, out);
    case OpFamily::reduce: return infer_shapes_reduce(op, in, attrs, out);
    case OpFamily::norm: return infer_shapes_norm(op, in, attrs, out);
    case OpFamily::linalg:
    case OpFamily::attention: return infer_shapes_linalg(op, in, attrs, out);
    case OpFamily::conv: return infer_shapes_conv(op, in, attrs, out);
    case OpFamily::data: return infer_shapes_data(op, in, attrs, out);
    case OpFamily::rnn: return infer_shapes_rnn(op, in, attrs, out);
    case OpFamily::view: {
      if (in.empty() || !in[0]) return err(ErrorCode::kInvalidArgument, sch.name, ": missing input x");
      // Views of a dense input: the shapes do not depend on the layout.
      TensorView x;
      x.data = reinterpret_cast<void*>(uintptr_t{4096});
      x.dtype = in[0]->dtype;
      x.shape = in[0]->shape;
      x.strides = contiguous_strides(x.shape);
      std::vector<TensorView> views;
      VRUN_RETURN_IF_ERROR(compute_view(op, x, attrs, &views));
      for (const auto& v : views) out->push_back({v.dtype, v.shape});
      return Status::ok();
    }
  }
  return err(ErrorCode::kInternal, "no shape function for op ", sch.name);
}

}  // namespace vrun
