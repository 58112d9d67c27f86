// Shape functions of the recurrent ops: lstm and tdt_greedy.
#include "kernels/ops/shape_infer.h"

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

Status infer_tdt_greedy(const std::vector<const TensorDesc*>& in, const Attrs& a, std::vector<TensorDesc>* out) {
  auto at = [&](size_t k) { return k < in.size() ? in[k] : nullptr; };
  const int64_t L = a.i("layers"), P = a.i("pred_hidden"), J = a.i("joint_hidden"), V = a.i("vocab");
  const int64_t D = static_cast<int64_t>(a.ints("durations").size()), O = V + D, cap = a.i("capacity");
  if (L < 1 || P < 1 || J < 1 || V < 2 || cap < 1 || a.i("max_symbols") < 1)
    return err(ErrorCode::kInvalidArgument, "tdt_greedy: layers ", L, ", pred_hidden ", P, ", joint_hidden ", J, ", vocab ", V,
               ", max_symbols ", a.i("max_symbols"), " and capacity ", cap, " must be positive (vocab >= 2)");
  for (int64_t d : a.ints("durations"))
    if (d < 0) return err(ErrorCode::kInvalidArgument, "tdt_greedy: duration ", d, " is negative");
  const TensorDesc *frames = at(0), *control = at(1), *state = at(2), *weights = at(3), *vectors = at(4);
  if (!frames || frames->dtype != DType::f32 || frames->shape.rank != 2 || frames->shape[1] != J)
    return err(ErrorCode::kInvalidArgument, "tdt_greedy: frames must be f32 [R, ", J, "], got ",
               frames ? dtype_name(frames->dtype) + std::string(" ") + frames->shape.str() : std::string("nothing"));
  // One stream: control [5], state [n]; B lanes: control [B, 5], state [B, n].
  const bool lanes = control && control->shape.rank == 2;
  const int64_t B = lanes ? control->shape[0] : 1, n = 2 * L * P + J;
  if (!control || control->dtype != DType::i32 || (lanes ? control->shape[1] != 5 : control->shape != Shape{5}))
    return err(ErrorCode::kInvalidArgument, "tdt_greedy: control must be i32 [5] or [B, 5], got ",
               control ? dtype_name(control->dtype) + std::string(" ") + control->shape.str() : std::string("nothing"));
  if (!state || state->dtype != DType::f32 || state->shape != (lanes ? Shape{B, n} : Shape{n}))
    return err(ErrorCode::kInvalidArgument, "tdt_greedy: state must be f32 ", lanes ? Shape{B, n}.str() : Shape{n}.str(), ", got ",
               state ? dtype_name(state->dtype) + std::string(" ") + state->shape.str() : std::string("nothing"));
  if (!weights || !is_activation(weights->dtype) || weights->shape != Shape{L * 8 * P * P + J * P + O * J})
    return err(ErrorCode::kInvalidArgument, "tdt_greedy: weights must be f32, f16 or bf16 [", L * 8 * P * P + J * P + O * J, "], got ",
               weights ? dtype_name(weights->dtype) + std::string(" ") + weights->shape.str() : std::string("nothing"));
  if (!vectors || vectors->dtype != DType::f32 || vectors->shape != Shape{V * P + L * 4 * P + J + O})
    return err(ErrorCode::kInvalidArgument, "tdt_greedy: vectors must be f32 [", V * P + L * 4 * P + J + O, "]");
  out->push_back({DType::i32, lanes ? Shape{B, cap + 1, 4} : Shape{cap + 1, 4}});
  out->push_back({DType::f32, state->shape});
  return Status::ok();
}

}  // namespace

Status infer_shapes_rnn(OpKind op, const std::vector<const TensorDesc*>& in, const Attrs& attrs,
                        std::vector<TensorDesc>* out) {
  if (op == OpKind::tdt_greedy) return infer_tdt_greedy(in, attrs, out);
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
