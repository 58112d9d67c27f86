// Shapes of the norm family: y has x's shape and dtype; the parameter vectors are checked
// against the normalised dim (last dim for layer/rms norm, the channel axis for batch norm).
#include <cmath>
#include <vector>

#include "kernels/ops/shape_infer.h"

namespace vrun {

namespace {

bool is_activation(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

Status check_param(const char* op, const char* what, const TensorDesc* p, int64_t want, const char* dim_name) {
  if (!p) return Status::ok();
  if (!is_activation(p->dtype))
    return err(ErrorCode::kUnsupported, op, ": ", what, " has dtype ", dtype_name(p->dtype), ", expected f32, f16 or bf16");
  if (p->shape.rank != 1 || p->shape[0] != want)
    return err(ErrorCode::kInvalidArgument, op, ": ", what, " must have shape [", want, "] (", dim_name, "), got ",
               p->shape.str());
  return Status::ok();
}

}  // namespace

Status infer_shapes_norm(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                         std::vector<TensorDesc>* out) {
  const OpSchema& s = op_schema(op);
  const char* name = s.name.c_str();
  if (in.empty() || !in[0]) return err(ErrorCode::kInvalidArgument, name, ": input x is missing");
  if (static_cast<int>(in.size()) < s.min_inputs() || static_cast<int>(in.size()) > s.max_inputs())
    return err(ErrorCode::kInvalidArgument, name, ": expected ", s.min_inputs(), "..", s.max_inputs(), " inputs, got ",
               in.size());
  for (int k = 0; k < s.min_inputs(); ++k)
    if (!in[k]) return err(ErrorCode::kInvalidArgument, name, ": input ", s.inputs[k].name, " is missing");
  const TensorDesc& x = *in[0];
  if (!is_activation(x.dtype))
    return err(ErrorCode::kUnsupported, name, ": x has dtype ", dtype_name(x.dtype), ", expected f32, f16 or bf16");
  const double eps = attrs.f("eps");
  if (!(eps >= 0) || !std::isfinite(eps))
    return err(ErrorCode::kInvalidArgument, name, ": eps must be finite and >= 0, got ", eps);
  auto input = [&](size_t k) { return k < in.size() ? in[k] : nullptr; };

  if (op == OpKind::batch_norm) {
    const int64_t axis = attrs.i("axis");
    const int ax = normalize_axis(axis, x.shape.rank);
    if (ax < 0) return err(ErrorCode::kInvalidArgument, name, ": axis ", axis, " out of range for x ", x.shape.str());
    const int64_t c = x.shape[ax];
    const char* param_names[] = {"mean", "var", "weight", "bias"};
    for (size_t k = 1; k < 5; ++k) VRUN_RETURN_IF_ERROR(check_param(name, param_names[k - 1], input(k), c, "channels of x"));
  } else {
    if (x.shape.rank < 1) return err(ErrorCode::kInvalidArgument, name, ": x must have rank >= 1, got a scalar");
    const int64_t d = x.shape[x.shape.rank - 1];
    VRUN_RETURN_IF_ERROR(check_param(name, "weight", input(1), d, "last dim of x"));
    if (op == OpKind::layer_norm) VRUN_RETURN_IF_ERROR(check_param(name, "bias", input(2), d, "last dim of x"));
    if (op == OpKind::rms_norm && !std::isfinite(attrs.f("unit_offset")))
      return err(ErrorCode::kInvalidArgument, name, ": unit_offset must be finite, got ", attrs.f("unit_offset"));
  }
  out->push_back(x);
  return Status::ok();
}

}  // namespace vrun
