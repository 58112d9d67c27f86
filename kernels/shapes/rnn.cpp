// Shape function of lstm.
#include "kernels/shape_infer.h"

namespace vrun {

namespace {

bool is_activation(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

Status expect_shape(const char* name, const TensorDesc* t, const Shape& want) {
  if (!t) return err(ErrorCode::kInvalidArgument, "lstm: missing input ", name);
  if (!is_activation(t->dtype))
    return err(ErrorCode::kInvalidArgument, "lstm: ", name, " must be f32, f16 or bf16, got ", dtype_name(t->dtype));
  if (t->shape != want)
    return err(ErrorCode::kInvalidArgument, "lstm: ", name, " must be ", want.str(), ", got ", t->shape.str());
  return Status::ok();
}

}  // namespace

Status infer_shapes_rnn(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& /*attrs*/,
                        std::vector<TensorDesc>* out) {
  if (op != OpKind::lstm) return err(ErrorCode::kInternal, "infer_shapes_rnn: op ", op_name(op), " is not an rnn");
  auto at = [&](size_t k) { return k < in.size() ? in[k] : nullptr; };
  const TensorDesc* x = at(0);
  const TensorDesc* h0 = at(1);
  if (!x || !h0) return err(ErrorCode::kInvalidArgument, "lstm: missing input ", x ? "h0" : "x");
  if (x->shape.rank != 3) return err(ErrorCode::kInvalidArgument, "lstm: x must be [B, T, I], got ", x->shape.str());
  if (!is_activation(x->dtype))
    return err(ErrorCode::kInvalidArgument, "lstm: x must be f32, f16 or bf16, got ", dtype_name(x->dtype));
  if (h0->shape.rank != 2) return err(ErrorCode::kInvalidArgument, "lstm: h0 must be [B, H], got ", h0->shape.str());
  const int64_t b = x->shape[0], t = x->shape[1], i = x->shape[2], h = h0->shape[1];
  VRUN_RETURN_IF_ERROR(expect_shape("h0", h0, Shape{b, h}));
  VRUN_RETURN_IF_ERROR(expect_shape("c0", at(2), Shape{b, h}));
  VRUN_RETURN_IF_ERROR(expect_shape("w_ih", at(3), Shape{4 * h, i}));
  VRUN_RETURN_IF_ERROR(expect_shape("w_hh", at(4), Shape{4 * h, h}));
  if (at(5)) VRUN_RETURN_IF_ERROR(expect_shape("b_ih", at(5), Shape{4 * h}));
  if (at(6)) VRUN_RETURN_IF_ERROR(expect_shape("b_hh", at(6), Shape{4 * h}));
  out->push_back({x->dtype, Shape{b, t, h}});
  out->push_back({x->dtype, Shape{b, h}});
  out->push_back({x->dtype, Shape{b, h}});
  return Status::ok();
}

}  // namespace vrun
