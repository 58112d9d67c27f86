// The elementwise ONNX operators onto vrun's ops: activations, arithmetic, comparisons, Where
// and Cast.
#include <cmath>
#include <map>

#include "models/onnx/onnx_importer.h"
#include "models/onnx/onnx_ops.h"

namespace vrun::onnx::detail {

Status Importer::map_unary(const Node& n, Val x) {
  static const std::map<std::string, OpKind> kUnary = {
      {"Relu", OpKind::relu},        {"Sigmoid", OpKind::sigmoid},
      {"Tanh", OpKind::tanh},        {"Exp", OpKind::exp},
      {"Log", OpKind::log},          {"Sqrt", OpKind::sqrt},
      {"Neg", OpKind::neg},          {"Abs", OpKind::abs},
      {"Erf", OpKind::erf},          {"Reciprocal", OpKind::reciprocal},
      {"Sin", OpKind::sin},          {"Cos", OpKind::cos},
      {"Softplus", OpKind::softplus}};
  if (n.op_type == "Sigmoid") sigmoid_of_[n.outputs[0]] = n.inputs[0];
  return set_output(n, mb_.op(kUnary.at(n.op_type), {x}, {}, n.name));
}

Status Importer::map_identity(const Node& n, Val x) {
  return set_output(n, x);
}

Status Importer::map_hard_sigmoid(const Node& n, Val x) {
  const std::string& op = n.op_type;
  const double alpha = op == "HardSwish" ? 1.0 / 6 : attr_f(n, "alpha", 0.2);
  const double beta = op == "HardSwish" ? 0.5 : attr_f(n, "beta", 0.5);
  Val h = mb_.op(OpKind::scale, {x}, {{"scale", alpha}, {"bias", beta}});
  h = mb_.op(OpKind::clamp, {h}, {{"min", 0.0}, {"max", 1.0}}, op == "HardSigmoid" ? n.name : "");
  return set_output(n, op == "HardSigmoid" ? h : mb_.op(OpKind::mul, {x, h}, {}, n.name));
}

Status Importer::map_gelu(const Node& n, Val x) {
  return set_output(n,
                    mb_.op(OpKind::gelu, {x}, {{"approximate", attr_s(n, "approximate", "none")}}, n.name));
}

Status Importer::map_leaky_relu(const Node& n, Val x) {
  const double a = attr_f(n, "alpha", 0.01);
  Val neg = mb_.op(OpKind::scale, {mb_.op(OpKind::clamp, {x}, {{"max", 0.0}})}, {{"scale", a}});
  return set_output(n, mb_.op(OpKind::add, {mb_.op(OpKind::relu, {x}), neg}, {}, n.name));
}

Status Importer::map_clip(const Node& n, Val x) {
  double lo = -INFINITY, hi = INFINITY;
  if (opset_ < 11) {
    lo = attr_f(n, "min", lo);
    hi = attr_f(n, "max", hi);
  } else {
    if (in(n, 1)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 1, "min"));
      if (!t->values.empty()) lo = t->values[0];
    }
    if (in(n, 2)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 2, "max"));
      if (!t->values.empty()) hi = t->values[0];
    }
  }
  return set_output(n, mb_.op(OpKind::clamp, {x}, {{"min", lo}, {"max", hi}}, n.name));
}

Status Importer::map_binary(const Node& n, Val) {
  static const std::map<std::string, OpKind> kBinary = {
      {"Add", OpKind::add},   {"Sub", OpKind::sub},        {"Mul", OpKind::mul},     {"Div", OpKind::div},
      {"Pow", OpKind::pow},   {"Max", OpKind::maximum},    {"Min", OpKind::minimum}, {"Equal", OpKind::equal},
      {"Less", OpKind::less}, {"Greater", OpKind::greater}};
  const std::string& op = n.op_type;
  const Value* a = in(n, 0);
  const Value* b = in(n, 1);
  if (!b) return err(ErrorCode::kInvalidProgram, "input 1 is missing");
  const DType like = a->known ? mb_.dtype(b->v) : mb_.dtype(a->v);
  // x * sigmoid(x): SiLU.
  if (op == "Mul" && !a->known && !b->known) {
    auto s0 = sigmoid_of_.find(n.inputs[1]);
    auto s1 = sigmoid_of_.find(n.inputs[0]);
    if (s0 != sigmoid_of_.end() && s0->second == n.inputs[0])
      return set_output(n, mb_.op(OpKind::silu, {a->v}, {}, n.name));
    if (s1 != sigmoid_of_.end() && s1->second == n.inputs[1])
      return set_output(n, mb_.op(OpKind::silu, {b->v}, {}, n.name));
  }
  // Pow with a known scalar exponent.
  if (op == "Pow" && b->known && b->t.numel() == 1) {
    const double e = b->t.values[0];
    if (e == 2) return set_output(n, mb_.op(OpKind::square, {a->v}, {}, n.name));
    if (e == 0.5) return set_output(n, mb_.op(OpKind::sqrt, {a->v}, {}, n.name));
    return set_output(n, mb_.op(OpKind::pow_scalar, {a->v}, {{"exponent", e}}, n.name));
  }
  // linear + bias: one op.
  if (op == "Add" && (a->known != b->known)) {
    const std::string& lin = a->known ? n.inputs[1] : n.inputs[0];
    const Tensor& bias = a->known ? a->t : b->t;
    auto li = linears_.find(lin);
    const Shape ys = shape(a->known ? b->v : a->v);
    bool row = bias.numel() == ys[ys.rank - 1];
    for (size_t d = 0; d + 1 < bias.dims.size(); ++d) row = row && bias.dims[d] == 1;
    if (li != linears_.end() && uses_[lin] == 1 && row && bias.dims.size() <= static_cast<size_t>(ys.rank)) {
      Tensor b1 = bias;
      b1.dims = {bias.numel()};
      Val bv = constant(b1, DType::f32);
      return set_output(n, mb_.op(OpKind::linear, {li->second.x, li->second.w, bv}, {}, n.name));
    }
  }
  VRUN_ASSIGN_OR_RETURN(Val av, val_in(n, 0, like));
  VRUN_ASSIGN_OR_RETURN(Val bv, val_in(n, 1, like));
  return set_output(n, mb_.op(kBinary.at(op), {av, bv}, {}, n.name));
}

Status Importer::map_where(const Node& n, Val) {
  VRUN_ASSIGN_OR_RETURN(Val c, val_in(n, 0, DType::bool_));
  VRUN_ASSIGN_OR_RETURN(Val a, val_in(n, 1));
  VRUN_ASSIGN_OR_RETURN(Val b, val_in(n, 2));
  return set_output(n, mb_.op(OpKind::where, {c, a, b}, {}, n.name));
}

Status Importer::map_cast(const Node& n, Val x) {
  const int32_t to = static_cast<int32_t>(attr_i(n, "to", 1));
  auto dt = dtype_of(to);
  if (!dt) return err(ErrorCode::kUnsupported, "Cast to ", elem_type_name(to), " is not supported");
  if (*dt == mb_.dtype(x)) return set_output(n, x);
  return set_output(n, mb_.op(OpKind::cast, {x}, {{"dtype", std::string(dtype_name(*dt))}}, n.name));
}

}  // namespace vrun::onnx::detail
