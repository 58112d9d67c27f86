// Shapes of the unary and binary families: unary keeps shape and dtype (cast changes the dtype),
// binary broadcasts numpy-style, comparisons give bool, where broadcasts all three inputs.
#include <cmath>

#include "kernels/ops/shape_infer.h"

namespace vrun {

namespace {

bool is_activation(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }
bool is_index_int(DType t) { return t == DType::i32 || t == DType::i64; }

Status need_inputs(OpKind op, const std::vector<const TensorDesc*>& in, int n) {
  const OpSchema& s = op_schema(op);
  if (static_cast<int>(in.size()) != n)
    return err(ErrorCode::kInvalidArgument, s.name, ": expected ", n, " inputs, got ", in.size());
  for (int k = 0; k < n; ++k)
    if (!in[k]) return err(ErrorCode::kInvalidArgument, s.name, ": input ", s.inputs[k].name, " is missing");
  return Status::ok();
}

Status infer_cast(const TensorDesc& x, const Attrs& attrs, std::vector<TensorDesc>* out) {
  const std::string& name = attrs.s("dtype");
  const auto to = dtype_from_name(name);
  if (!to) return err(ErrorCode::kInvalidArgument, "cast: unknown dtype '", name, "'");
  if (is_quantized(*to))
    return err(ErrorCode::kUnsupported, "cast: to block-quantised ", name, " is not an elementwise op (from ",
               dtype_name(x.dtype), ")");
  if (is_quantized(x.dtype)) {
    if (!is_float(*to))
      return err(ErrorCode::kUnsupported, "cast: from ", dtype_name(x.dtype), " only to a float dtype, not ", name);
    if (x.shape.rank == 0 || x.shape[x.shape.rank - 1] % kQuantBlock != 0)
      return err(ErrorCode::kInvalidArgument, "cast: ", dtype_name(x.dtype), " input ", x.shape.str(),
                 " must have a last dim that is a multiple of ", kQuantBlock);
  }
  out->push_back({*to, x.shape});
  return Status::ok();
}

Status infer_unary(OpKind op, const TensorDesc& x, const Attrs& attrs, std::vector<TensorDesc>* out) {
  const char* name = op_name(op);
  if (op == OpKind::cast) return infer_cast(x, attrs, out);
  if (!is_activation(x.dtype))
    return err(ErrorCode::kUnsupported, name, ": x has dtype ", dtype_name(x.dtype), ", expected f32, f16 or bf16");
  if (op == OpKind::gelu) {
    const std::string& a = attrs.s("approximate");
    if (a != "none" && a != "tanh")
      return err(ErrorCode::kInvalidArgument, "gelu: approximate must be 'none' or 'tanh', got '", a, "'");
  }
  if (op == OpKind::clamp && (std::isnan(attrs.f("min")) || std::isnan(attrs.f("max"))))
    return err(ErrorCode::kInvalidArgument, "clamp: min and max must not be nan (got ", attrs.f("min"), ", ",
               attrs.f("max"), ")");
  out->push_back(x);
  return Status::ok();
}

Status infer_binary(OpKind op, const std::vector<const TensorDesc*>& in, std::vector<TensorDesc>* out) {
  const char* name = op_name(op);
  VRUN_RETURN_IF_ERROR(need_inputs(op, in, 2));
  const TensorDesc &a = *in[0], &b = *in[1];
  if (a.dtype != b.dtype)
    return err(ErrorCode::kInvalidArgument, name, ": a and b must have the same dtype, got ", dtype_name(a.dtype),
               " and ", dtype_name(b.dtype));
  const bool int_ok = op != OpKind::div && op != OpKind::pow;
  if (!is_activation(a.dtype) && !(int_ok && is_index_int(a.dtype)))
    return err(ErrorCode::kUnsupported, name, ": dtype ", dtype_name(a.dtype), " is not supported (expected f32, f16, bf16",
               int_ok ? ", i32 or i64)" : ")");
  Shape s;
  if (!broadcast_shapes(a.shape, b.shape, &s))
    return err(ErrorCode::kInvalidArgument, name, ": shapes ", a.shape.str(), " and ", b.shape.str(),
               " do not broadcast");
  const bool cmp = op == OpKind::equal || op == OpKind::less || op == OpKind::greater;
  out->push_back({cmp ? DType::bool_ : a.dtype, s});
  return Status::ok();
}

Status infer_where(const std::vector<const TensorDesc*>& in, std::vector<TensorDesc>* out) {
  VRUN_RETURN_IF_ERROR(need_inputs(OpKind::where, in, 3));
  const TensorDesc &c = *in[0], &a = *in[1], &b = *in[2];
  if (c.dtype != DType::bool_ && c.dtype != DType::u8)
    return err(ErrorCode::kInvalidArgument, "where: cond must be bool or u8, got ", dtype_name(c.dtype));
  if (a.dtype != b.dtype)
    return err(ErrorCode::kInvalidArgument, "where: a and b must have the same dtype, got ", dtype_name(a.dtype),
               " and ", dtype_name(b.dtype));
  if (is_quantized(a.dtype))
    return err(ErrorCode::kUnsupported, "where: block-quantised dtype ", dtype_name(a.dtype), " is not supported");
  Shape s, s2;
  if (!broadcast_shapes(c.shape, a.shape, &s) || !broadcast_shapes(s, b.shape, &s2))
    return err(ErrorCode::kInvalidArgument, "where: shapes cond ", c.shape.str(), ", a ", a.shape.str(), ", b ",
               b.shape.str(), " do not broadcast");
  out->push_back({a.dtype, s2});
  return Status::ok();
}

}  // namespace

Status infer_shapes_elementwise(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                                std::vector<TensorDesc>* out) {
  const OpSchema& s = op_schema(op);
  if (s.family == OpFamily::unary) {
    VRUN_RETURN_IF_ERROR(need_inputs(op, in, 1));
    return infer_unary(op, *in[0], attrs, out);
  }
  if (s.family != OpFamily::binary)
    return err(ErrorCode::kInternal, "infer_shapes_elementwise called for ", s.name, " (family ",
               op_family_name(s.family), ")");
  if (op == OpKind::where) return infer_where(in, out);
  return infer_binary(op, in, out);
}

}  // namespace vrun
