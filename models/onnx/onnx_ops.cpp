// ONNX operators onto vrun's ops: the mappings for nodes that could not be evaluated at import.
#include <algorithm>
#include <cmath>

#include "models/onnx/onnx_fold.h"
#include "models/onnx/onnx_importer.h"

namespace vrun::onnx::detail {

namespace {

int64_t attr_i(const Node& n, const char* name, int64_t dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->i : dflt;
}
double attr_f(const Node& n, const char* name, double dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->f : dflt;
}
std::string attr_s(const Node& n, const char* name, const std::string& dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->s : dflt;
}
std::vector<int64_t> attr_ints(const Node& n, const char* name, std::vector<int64_t> dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->ints : dflt;
}

int norm_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return -1;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Conv/MaxPool geometry: ONNX pads [x1_begin, x2_begin, x1_end, x2_end] -> vrun's per-dim
// [begin, end] pairs.
Result<std::vector<int64_t>> spatial_pads(const Node& n, int nd) {
  const std::string auto_pad = attr_s(n, "auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    return err(ErrorCode::kUnsupported, "auto_pad ", auto_pad, " is not supported (export with explicit pads)");
  std::vector<int64_t> pads = attr_ints(n, "pads", std::vector<int64_t>(static_cast<size_t>(2 * nd), 0));
  if (auto_pad == "VALID") pads.assign(static_cast<size_t>(2 * nd), 0);
  if (pads.size() != static_cast<size_t>(2 * nd))
    return err(ErrorCode::kInvalidProgram, "pads holds ", pads.size(), " values, expected ", 2 * nd);
  std::vector<int64_t> out;
  for (int i = 0; i < nd; ++i) {
    out.push_back(pads[static_cast<size_t>(i)]);
    out.push_back(pads[static_cast<size_t>(i + nd)]);
  }
  return out;
}

}  // namespace

Status Importer::map_node(const Node& n) {
  const std::string& op = n.op_type;
  auto out = [&](Val v) {
    set(n.outputs.at(0), v);
    return Status::ok();
  };
  if (n.outputs.empty()) return err(ErrorCode::kInvalidProgram, "node has no outputs");
  auto x_known = [&]() { return in(n, 0) && in(n, 0)->known; };
  if (x_known() && op != "Concat" && op != "Add" && op != "Mul" && op != "Sub" && op != "Div" && op != "Pow" &&
      op != "Where" && op != "Equal" && op != "Less" && op != "Greater" && op != "Max" && op != "Min")
    return err(ErrorCode::kUnsupported, "cannot be evaluated at import and its first input is a constant");
  VRUN_ASSIGN_OR_RETURN(Val x, val_in(n, 0));
  const int rank = shape(x).rank;

  static const std::map<std::string, OpKind> kUnary = {
      {"Relu", OpKind::relu}, {"Sigmoid", OpKind::sigmoid}, {"Tanh", OpKind::tanh},   {"Exp", OpKind::exp},
      {"Log", OpKind::log},   {"Sqrt", OpKind::sqrt},       {"Neg", OpKind::neg},     {"Abs", OpKind::abs},
      {"Erf", OpKind::erf},   {"Reciprocal", OpKind::reciprocal}, {"Sin", OpKind::sin}, {"Cos", OpKind::cos},
      {"Softplus", OpKind::softplus}};
  if (auto it = kUnary.find(op); it != kUnary.end()) {
    if (op == "Sigmoid") sigmoid_of_[n.outputs[0]] = n.inputs[0];
    return out(mb_.op(it->second, {x}, {}, n.name));
  }
  if (op == "Identity" || op == "Dropout") return out(x);
  if (op == "HardSigmoid" || op == "HardSwish") {
    const double alpha = op == "HardSwish" ? 1.0 / 6 : attr_f(n, "alpha", 0.2);
    const double beta = op == "HardSwish" ? 0.5 : attr_f(n, "beta", 0.5);
    Val h = mb_.op(OpKind::scale, {x}, {{"scale", alpha}, {"bias", beta}});
    h = mb_.op(OpKind::clamp, {h}, {{"min", 0.0}, {"max", 1.0}}, op == "HardSigmoid" ? n.name : "");
    return out(op == "HardSigmoid" ? h : mb_.op(OpKind::mul, {x, h}, {}, n.name));
  }
  if (op == "Gelu") return out(mb_.op(OpKind::gelu, {x}, {{"approximate", attr_s(n, "approximate", "none")}}, n.name));
  if (op == "LeakyRelu") {
    const double a = attr_f(n, "alpha", 0.01);
    Val neg = mb_.op(OpKind::scale, {mb_.op(OpKind::clamp, {x}, {{"max", 0.0}})}, {{"scale", a}});
    return out(mb_.op(OpKind::add, {mb_.op(OpKind::relu, {x}), neg}, {}, n.name));
  }
  if (op == "Clip") {
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
    return out(mb_.op(OpKind::clamp, {x}, {{"min", lo}, {"max", hi}}, n.name));
  }
  static const std::map<std::string, OpKind> kBinary = {
      {"Add", OpKind::add},         {"Sub", OpKind::sub},         {"Mul", OpKind::mul},
      {"Div", OpKind::div},         {"Pow", OpKind::pow},         {"Max", OpKind::maximum},
      {"Min", OpKind::minimum},     {"Equal", OpKind::equal},     {"Less", OpKind::less},
      {"Greater", OpKind::greater}};
  if (auto it = kBinary.find(op); it != kBinary.end()) {
    const Value* a = in(n, 0);
    const Value* b = in(n, 1);
    if (!b) return err(ErrorCode::kInvalidProgram, "input 1 is missing");
    const DType like = a->known ? mb_.dtype(b->v) : mb_.dtype(a->v);
    // x * sigmoid(x): SiLU.
    if (op == "Mul" && !a->known && !b->known) {
      auto s0 = sigmoid_of_.find(n.inputs[1]);
      auto s1 = sigmoid_of_.find(n.inputs[0]);
      if (s0 != sigmoid_of_.end() && s0->second == n.inputs[0]) return out(mb_.op(OpKind::silu, {a->v}, {}, n.name));
      if (s1 != sigmoid_of_.end() && s1->second == n.inputs[1]) return out(mb_.op(OpKind::silu, {b->v}, {}, n.name));
    }
    // Pow with a known scalar exponent.
    if (op == "Pow" && b->known && b->t.numel() == 1) {
      const double e = b->t.values[0];
      if (e == 2) return out(mb_.op(OpKind::square, {a->v}, {}, n.name));
      if (e == 0.5) return out(mb_.op(OpKind::sqrt, {a->v}, {}, n.name));
      return out(mb_.op(OpKind::pow_scalar, {a->v}, {{"exponent", e}}, n.name));
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
        return out(mb_.op(OpKind::linear, {li->second.x, li->second.w, bv}, {}, n.name));
      }
    }
    VRUN_ASSIGN_OR_RETURN(Val av, val_in(n, 0, like));
    VRUN_ASSIGN_OR_RETURN(Val bv, val_in(n, 1, like));
    return out(mb_.op(it->second, {av, bv}, {}, n.name));
  }
  if (op == "Where") {
    VRUN_ASSIGN_OR_RETURN(Val c, val_in(n, 0, DType::bool_));
    VRUN_ASSIGN_OR_RETURN(Val a, val_in(n, 1));
    VRUN_ASSIGN_OR_RETURN(Val b, val_in(n, 2));
    return out(mb_.op(OpKind::where, {c, a, b}, {}, n.name));
  }
  if (op == "Cast") {
    const int32_t to = static_cast<int32_t>(attr_i(n, "to", 1));
    auto dt = dtype_of(to);
    if (!dt) return err(ErrorCode::kUnsupported, "Cast to ", elem_type_name(to), " is not supported");
    if (*dt == mb_.dtype(x)) return out(x);
    return out(mb_.op(OpKind::cast, {x}, {{"dtype", std::string(dtype_name(*dt))}}, n.name));
  }
  if (op == "Conv") {
    VRUN_ASSIGN_OR_RETURN(const Tensor* w, known_in(n, 1, "weight"));
    const int nd = rank - 2;
    if (nd != 1 && nd != 2) return err(ErrorCode::kUnsupported, "Conv over ", nd, " spatial dims (1 or 2 supported)");
    VRUN_ASSIGN_OR_RETURN(auto pads, spatial_pads(n, nd));
    const auto strides = attr_ints(n, "strides", std::vector<int64_t>(static_cast<size_t>(nd), 1));
    const auto dil = attr_ints(n, "dilations", std::vector<int64_t>(static_cast<size_t>(nd), 1));
    if (strides.size() != static_cast<size_t>(nd) || dil.size() != static_cast<size_t>(nd))
      return err(ErrorCode::kInvalidProgram, "strides and dilations need ", nd, " values");
    std::vector<Val> ins{x, constant(*w, DType::f32)};
    if (in(n, 2)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* b, known_in(n, 2, "bias"));
      ins.push_back(constant(*b, DType::f32));
    }
    const int64_t groups = attr_i(n, "group", 1);
    if (nd == 1)
      return out(mb_.op(OpKind::conv1d, ins,
                        {{"stride", strides[0]}, {"dilation", dil[0]}, {"padding", pads}, {"groups", groups}}, n.name));
    return out(mb_.op(OpKind::conv2d, ins, {{"stride", strides}, {"dilation", dil}, {"padding", pads}, {"groups", groups}},
                      n.name));
  }
  if (op == "MaxPool") {
    if (rank != 4) return err(ErrorCode::kUnsupported, "MaxPool over ", rank - 2, " spatial dims (2 supported)");
    if (n.outputs.size() > 1 && !n.outputs[1].empty())
      return err(ErrorCode::kUnsupported, "MaxPool's Indices output is not supported");
    VRUN_ASSIGN_OR_RETURN(auto pads, spatial_pads(n, 2));
    return out(mb_.op(OpKind::max_pool2d, {x},
                      {{"kernel", attr_ints(n, "kernel_shape", {})}, {"stride", attr_ints(n, "strides", {1, 1})},
                       {"padding", pads}, {"dilation", attr_ints(n, "dilations", {1, 1})},
                       {"ceil_mode", attr_i(n, "ceil_mode", 0)}},
                      n.name));
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    std::vector<int64_t> axes;
    for (int d = 2; d < rank; ++d) axes.push_back(d);
    return out(mb_.op(op == "GlobalAveragePool" ? OpKind::reduce_mean : OpKind::reduce_max, {x},
                      {{"axes", axes}, {"keepdim", 1}}, n.name));
  }
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin") {
    std::vector<int64_t> axes = attr_ints(n, "axes", {});
    if (in(n, 1)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 1, "axes"));
      axes = ints_of(*t);
    }
    if (axes.empty() && attr_i(n, "noop_with_empty_axes", 0)) return out(x);
    const OpKind k = op == "ReduceMean" ? OpKind::reduce_mean
                     : op == "ReduceSum" ? OpKind::reduce_sum
                     : op == "ReduceMax" ? OpKind::reduce_max
                                         : OpKind::reduce_min;
    return out(mb_.op(k, {x}, {{"axes", axes}, {"keepdim", attr_i(n, "keepdims", 1)}}, n.name));
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    const int64_t axis = attr_i(n, "axis", opset_ < 13 ? 1 : -1);
    if (opset_ < 13 && norm_axis(axis, rank) != rank - 1)
      return err(ErrorCode::kUnsupported, op, " before opset 13 over axis ", axis, " of a rank-", rank,
                 " input (only the last axis)");
    return out(mb_.op(op == "Softmax" ? OpKind::softmax : OpKind::log_softmax, {x}, {{"axis", axis}}, n.name));
  }
  if (op == "BatchNormalization") {
    VRUN_ASSIGN_OR_RETURN(const Tensor* sc, known_in(n, 1, "scale"));
    VRUN_ASSIGN_OR_RETURN(const Tensor* b, known_in(n, 2, "B"));
    VRUN_ASSIGN_OR_RETURN(const Tensor* mean, known_in(n, 3, "mean"));
    VRUN_ASSIGN_OR_RETURN(const Tensor* var, known_in(n, 4, "var"));
    return out(mb_.op(OpKind::batch_norm,
                      {x, constant(*mean, DType::f32), constant(*var, DType::f32), constant(*sc, DType::f32),
                       constant(*b, DType::f32)},
                      {{"eps", attr_f(n, "epsilon", 1e-5)}, {"axis", 1}}, n.name));
  }
  if (op == "MatMul" || op == "Gemm") {
    const Value* bvalue = in(n, 1);
    if (!bvalue) return err(ErrorCode::kInvalidProgram, "input 1 is missing");
    if (op == "Gemm" && attr_i(n, "transA", 0)) return err(ErrorCode::kUnsupported, "Gemm with transA = 1");
    if (bvalue->known && bvalue->t.dims.size() == 2) {
      // vrun's linear takes weight [N, K]: MatMul's B [K, N] transposed (Gemm's too unless transB).
      const Tensor& B = bvalue->t;
      const bool trans = op == "Gemm" && attr_i(n, "transB", 0);
      const int64_t K = trans ? B.dims[1] : B.dims[0], N = trans ? B.dims[0] : B.dims[1];
      const double alpha = op == "Gemm" ? attr_f(n, "alpha", 1.0) : 1.0;
      Tensor w;
      w.name = B.name;
      w.elem_type = 1;
      w.dims = {N, K};
      w.values.resize(static_cast<size_t>(N * K));
      for (int64_t i = 0; i < N; ++i)
        for (int64_t k = 0; k < K; ++k)
          w.values[static_cast<size_t>(i * K + k)] = alpha * B.values[static_cast<size_t>(trans ? i * K + k : k * N + i)];
      if (trans || alpha != 1.0) w.name.clear();
      Val wv = constant(w, DType::f32);
      if (op == "Gemm" && in(n, 2)) {
        VRUN_ASSIGN_OR_RETURN(const Tensor* c, known_in(n, 2, "C"));
        if (c->numel() != N && c->numel() != 1)
          return err(ErrorCode::kUnsupported, "Gemm's C must hold N (", N, ") values or one, got ", c->numel());
        Tensor bias;
        bias.elem_type = 1;
        bias.dims = {N};
        const double beta = attr_f(n, "beta", 1.0);
        for (int64_t i = 0; i < N; ++i) bias.values.push_back(beta * c->values[c->numel() == 1 ? 0 : static_cast<size_t>(i)]);
        return out(mb_.op(OpKind::linear, {x, wv, constant(bias, DType::f32)}, {}, n.name));
      }
      linears_[n.outputs[0]] = {x, wv};
      return out(mb_.op(OpKind::linear, {x, wv}, {}, n.name));
    }
    if (op == "Gemm") return err(ErrorCode::kUnsupported, "Gemm with a B computed at run time");
    VRUN_ASSIGN_OR_RETURN(Val b, val_in(n, 1));
    return out(mb_.op(OpKind::bmm, {x, b}, {}, n.name));
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm = attr_ints(n, "perm", {});
    if (perm.empty())
      for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    return out(mb_.op(OpKind::permute, {x}, {{"perm", perm}}, n.name));
  }
  if (op == "Reshape") {
    VRUN_ASSIGN_OR_RETURN(const Tensor* s, known_in(n, 1, "shape"));
    std::vector<int64_t> dims = ints_of(*s);
    if (attr_i(n, "allowzero", 0))
      for (int64_t d : dims)
        if (d == 0) return err(ErrorCode::kUnsupported, "Reshape with allowzero = 1 and a 0 in the shape");
    return out(mb_.op(OpKind::reshape, {x}, {{"shape", dims}}, n.name));
  }
  if (op == "Flatten") {
    const int ax = norm_axis(attr_i(n, "axis", 1), rank + 1);
    if (ax < 0) return err(ErrorCode::kInvalidProgram, "axis out of range");
    const Shape xs = shape(x);
    const auto sym = mb_.symbolic_dims(x);
    int64_t a = 1, b = 1;
    bool sym_a = false, sym_b = false;
    for (int d = 0; d < rank; ++d) {
      (d < ax ? a : b) *= xs[d];
      (d < ax ? sym_a : sym_b) = (d < ax ? sym_a : sym_b) || sym[static_cast<size_t>(d)];
    }
    if (sym_a && sym_b) return err(ErrorCode::kUnsupported, "Flatten merges symbolic dims on both sides; fix them with --dim");
    if (sym_a && !(ax == 1)) return err(ErrorCode::kUnsupported, "Flatten of several symbolic leading dims");
    return out(mb_.op(OpKind::reshape, {x}, {{"shape", std::vector<int64_t>{sym_a ? 0 : a, sym_a ? b : -1}}}, n.name));
  }
  if (op == "Squeeze") {
    std::vector<int64_t> axes = attr_ints(n, "axes", {});
    if (in(n, 1)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 1, "axes"));
      axes = ints_of(*t);
    }
    const Shape xs = shape(x);
    const auto sym = mb_.symbolic_dims(x);
    std::vector<int> drop;
    if (axes.empty()) {
      for (int d = 0; d < rank; ++d)
        if (xs[d] == 1 && !sym[static_cast<size_t>(d)]) drop.push_back(d);
    } else {
      for (int64_t a : axes) {
        const int d = norm_axis(a, rank);
        if (d < 0) return err(ErrorCode::kInvalidProgram, "axis ", a, " out of range for rank ", rank);
        drop.push_back(d);
      }
    }
    std::sort(drop.rbegin(), drop.rend());
    Val y = x;
    for (int d : drop) y = mb_.op(OpKind::select, {y}, {{"axis", d}, {"index", 0}});
    return out(y);
  }
  if (op == "Unsqueeze") {
    std::vector<int64_t> axes = attr_ints(n, "axes", {});
    if (in(n, 1)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 1, "axes"));
      axes = ints_of(*t);
    }
    const int r = rank + static_cast<int>(axes.size());
    std::vector<bool> is_new(static_cast<size_t>(r), false);
    for (int64_t a : axes) {
      const int d = norm_axis(a, r);
      if (d < 0) return err(ErrorCode::kInvalidProgram, "axis ", a, " out of range for rank ", r);
      is_new[static_cast<size_t>(d)] = true;
    }
    const Shape xs = shape(x);
    std::vector<int64_t> dims;
    std::vector<int> src;
    int k = 0;
    for (int i = 0; i < r; ++i) {
      if (is_new[static_cast<size_t>(i)]) {
        dims.push_back(1);
        src.push_back(-1);
      } else {
        dims.push_back(xs[k]);
        src.push_back(k++);
      }
    }
    VRUN_ASSIGN_OR_RETURN(Val y, reshape_keep(x, dims, src));
    return out(y);
  }
  if (op == "Concat") {
    std::vector<Val> ins;
    DType like = DType::f32;
    for (size_t k = 0; k < n.inputs.size(); ++k)
      if (const Value* v = in(n, k); v && !v->known) like = mb_.dtype(v->v);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      VRUN_ASSIGN_OR_RETURN(Val v, val_in(n, k, like));
      ins.push_back(v);
    }
    return out(mb_.op(OpKind::concat, ins, {{"axis", attr_i(n, "axis", 0)}}, n.name));
  }
  if (op == "Split") {
    const int ax = norm_axis(attr_i(n, "axis", 0), rank);
    if (ax < 0) return err(ErrorCode::kInvalidProgram, "axis out of range");
    std::vector<int64_t> sizes = attr_ints(n, "split", {});
    if (in(n, 1)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 1, "split"));
      sizes = ints_of(*t);
    }
    const int64_t dim = shape(x)[ax];
    if (mb_.symbolic_dims(x)[static_cast<size_t>(ax)])
      return err(ErrorCode::kUnsupported, "Split along a symbolic dim");
    if (sizes.empty()) {
      const int64_t parts = attr_i(n, "num_outputs", static_cast<int64_t>(n.outputs.size()));
      if (parts < 1) return err(ErrorCode::kInvalidProgram, "Split into ", parts, " parts");
      const int64_t each = (dim + parts - 1) / parts;
      for (int64_t p = 0, left = dim; p < parts; ++p, left -= each) sizes.push_back(std::min(each, std::max<int64_t>(left, 0)));
    }
    if (sizes.size() != n.outputs.size())
      return err(ErrorCode::kInvalidProgram, "Split gives ", sizes.size(), " sizes for ", n.outputs.size(), " outputs");
    auto parts = mb_.op_n(OpKind::split, {x}, {{"axis", ax}, {"sizes", sizes}}, n.name);
    for (size_t k = 0; k < parts.size() && k < n.outputs.size(); ++k) set(n.outputs[k], parts[k]);
    return Status::ok();
  }
  if (op == "Gather") {
    // Known indices into a method value: one index is a select, consecutive ones a slice.
    VRUN_ASSIGN_OR_RETURN(const Tensor* idx, known_in(n, 1, "indices"));
    const int ax = norm_axis(attr_i(n, "axis", 0), rank);
    if (ax < 0) return err(ErrorCode::kInvalidProgram, "axis out of range");
    if (mb_.symbolic_dims(x)[static_cast<size_t>(ax)]) return err(ErrorCode::kUnsupported, "Gather along a symbolic dim");
    const int64_t dim = shape(x)[ax];
    std::vector<int64_t> ids = ints_of(*idx);
    for (int64_t& i : ids) {
      if (i < 0) i += dim;
      if (i < 0 || i >= dim) return err(ErrorCode::kInvalidProgram, "index out of range for dim ", dim);
    }
    if (idx->dims.empty()) return out(mb_.op(OpKind::select, {x}, {{"axis", ax}, {"index", ids[0]}}, n.name));
    bool consecutive = idx->dims.size() == 1 && !ids.empty();
    for (size_t i = 1; i < ids.size(); ++i) consecutive = consecutive && ids[i] == ids[i - 1] + 1;
    if (!consecutive) return err(ErrorCode::kUnsupported, "Gather of non-consecutive indices from a method value");
    return out(mb_.op(OpKind::slice, {x},
                      {{"axis", ax}, {"start", ids[0]}, {"end", ids.back() + 1}, {"step", int64_t{1}}}, n.name));
  }
  if (op == "Slice") {
    VRUN_ASSIGN_OR_RETURN(const Tensor* st, known_in(n, 1, "starts"));
    VRUN_ASSIGN_OR_RETURN(const Tensor* en, known_in(n, 2, "ends"));
    const auto starts = ints_of(*st), ends = ints_of(*en);
    std::vector<int64_t> axes, steps;
    if (in(n, 3)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 3, "axes"));
      axes = ints_of(*t);
    } else {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (in(n, 4)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 4, "steps"));
      steps = ints_of(*t);
    } else {
      steps.assign(starts.size(), 1);
    }
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      return err(ErrorCode::kInvalidProgram, "starts, ends, axes and steps differ in length");
    const Shape xs = shape(x);
    const auto sym = mb_.symbolic_dims(x);
    Val y = x;
    for (size_t k = 0; k < axes.size(); ++k) {
      const int d = norm_axis(axes[k], rank);
      if (d < 0) return err(ErrorCode::kInvalidProgram, "axis ", axes[k], " out of range");
      if (steps[k] < 1) return err(ErrorCode::kUnsupported, "Slice with step ", steps[k], " (only positive steps)");
      int64_t s = starts[k], e = ends[k];
      if ((s < 0 || (e < 0 && e != INT64_MIN)) && sym[static_cast<size_t>(d)])
        return err(ErrorCode::kUnsupported, "Slice from the end of a symbolic dim; fix it with --dim");
      const int64_t dim = xs[d];
      if (s < 0) s = std::max<int64_t>(0, s + dim);
      if (e < 0) e = std::max<int64_t>(0, e + dim);
      if (!sym[static_cast<size_t>(d)]) {
        s = std::min(s, dim);
        e = std::min(e, dim);
        if (s == 0 && e == dim && steps[k] == 1) continue;
      }
      if (e < s) e = s;
      y = mb_.op(OpKind::slice, {y}, {{"axis", d}, {"start", s}, {"end", e}, {"step", steps[k]}});
    }
    return out(y);
  }
  if (op == "Pad") {
    std::vector<int64_t> pads;
    double value = 0;
    if (opset_ < 11) {
      pads = attr_ints(n, "pads", {});
      value = attr_f(n, "value", 0.0);
    } else {
      VRUN_ASSIGN_OR_RETURN(const Tensor* p, known_in(n, 1, "pads"));
      pads = ints_of(*p);
      if (in(n, 2)) {
        VRUN_ASSIGN_OR_RETURN(const Tensor* v, known_in(n, 2, "constant_value"));
        if (!v->values.empty()) value = v->values[0];
      }
    }
    std::vector<int64_t> axes;
    if (in(n, 3)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* a, known_in(n, 3, "axes"));
      axes = ints_of(*a);
    } else {
      for (int d = 0; d < rank; ++d) axes.push_back(d);
    }
    if (pads.size() != 2 * axes.size())
      return err(ErrorCode::kInvalidProgram, "pads holds ", pads.size(), " values for ", axes.size(), " axes");
    std::vector<int64_t> before(static_cast<size_t>(rank), 0), after(static_cast<size_t>(rank), 0);
    for (size_t k = 0; k < axes.size(); ++k) {
      const int d = norm_axis(axes[k], rank);
      if (d < 0) return err(ErrorCode::kInvalidProgram, "axis ", axes[k], " out of range");
      before[static_cast<size_t>(d)] = pads[k];
      after[static_cast<size_t>(d)] = pads[k + axes.size()];
    }
    int first = rank;
    for (int d = 0; d < rank; ++d)
      if (before[static_cast<size_t>(d)] || after[static_cast<size_t>(d)]) {
        first = d;
        break;
      }
    if (first == rank) return out(x);
    std::vector<int64_t> vp;
    for (int d = rank - 1; d >= first; --d) {
      vp.push_back(before[static_cast<size_t>(d)]);
      vp.push_back(after[static_cast<size_t>(d)]);
    }
    std::string mode = attr_s(n, "mode", "constant");
    if (mode == "edge") mode = "replicate";
    if (mode != "constant" && mode != "reflect" && mode != "replicate")
      return err(ErrorCode::kUnsupported, "Pad mode '", mode, "'");
    return out(mb_.op(OpKind::pad, {x}, {{"pads", vp}, {"mode", mode}, {"value", value}}, n.name));
  }
  if (op == "Resize" || op == "Upsample") {
    const std::string mode = attr_s(n, "mode", "nearest");
    if (mode != "nearest") return err(ErrorCode::kUnsupported, op, " mode '", mode, "' (nearest only)");
    if (attr_s(n, "coordinate_transformation_mode", "") == "tf_crop_and_resize")
      return err(ErrorCode::kUnsupported, "coordinate_transformation_mode tf_crop_and_resize");
    const Shape xs = shape(x);
    std::vector<double> scales;
    const size_t scales_at = op == "Upsample" ? 1 : (opset_ < 11 ? 1 : 2);
    if (const Value* s = in(n, scales_at); s && s->known && s->t.numel() > 0) {
      scales = s->t.values;
    } else if (const Value* z = in(n, 3); z && op == "Resize" && z->known) {
      for (int d = 0; d < rank && static_cast<size_t>(d) < z->t.values.size(); ++d)
        scales.push_back(z->t.values[static_cast<size_t>(d)] / static_cast<double>(xs[d]));
    } else if (const Attribute* a = n.attr("scales")) {
      scales = a->floats;
    }
    if (scales.size() != static_cast<size_t>(rank) || rank != 4)
      return err(ErrorCode::kUnsupported, op, " needs known scales (or sizes) over a rank-4 input");
    int64_t f[4];
    for (int d = 0; d < 4; ++d) {
      f[d] = static_cast<int64_t>(std::lround(scales[static_cast<size_t>(d)]));
      if (f[d] < 1 || std::fabs(scales[static_cast<size_t>(d)] - static_cast<double>(f[d])) > 1e-6 || (d < 2 && f[d] != 1))
        return err(ErrorCode::kUnsupported, op, " by scales [", scales[0], ", ", scales[1], ", ", scales[2], ", ",
                   scales[3], "]: only whole-number factors on H and W");
    }
    // Each pixel repeated f times: a broadcast view, made dense, seen as the larger image.
    VRUN_ASSIGN_OR_RETURN(Val v6, reshape_keep(x, {xs[0], xs[1], xs[2], 1, xs[3], 1}, {0, 1, 2, -1, 3, -1}));
    Val e = mb_.op(OpKind::expand, {v6}, {{"shape", std::vector<int64_t>{-1, -1, -1, f[2], -1, f[3]}}});
    Val c = mb_.op(OpKind::copy, {e}, {}, n.name);
    VRUN_ASSIGN_OR_RETURN(Val y, reshape_keep(c, {xs[0], xs[1], xs[2] * f[2], xs[3] * f[3]}, {0, 1, -1, -1}));
    return out(y);
  }
  if (op == "LSTM") {
    if (attr_s(n, "direction", "forward") != "forward" || attr_i(n, "layout", 0) != 0 || n.attr("clip") ||
        n.attr("activations") || attr_i(n, "input_forget", 0))
      return err(ErrorCode::kUnsupported, "LSTM: forward direction, layout 0, default activations only");
    if (in(n, 4)) return err(ErrorCode::kUnsupported, "LSTM: sequence_lens is not supported");
    VRUN_ASSIGN_OR_RETURN(const Tensor* W, known_in(n, 1, "W"));
    VRUN_ASSIGN_OR_RETURN(const Tensor* R, known_in(n, 2, "R"));
    if (W->dims.size() != 3 || R->dims.size() != 3 || W->dims[0] != 1 || R->dims[0] != 1 || W->dims[1] % 4 ||
        R->dims[1] != W->dims[1] || R->dims[2] * 4 != R->dims[1])
      return err(ErrorCode::kInvalidProgram, "LSTM: W and R must be [1, 4H, I] and [1, 4H, H]");
    const int64_t H = R->dims[2], I = W->dims[2];
    // ONNX gates (i, o, f, c) -> vrun's torch order (i, f, g, o).
    const int order[4] = {0, 2, 3, 1};
    auto regate = [&](const std::vector<double>& v, int64_t cols, int64_t offset) {
      Tensor t;
      t.elem_type = 1;
      t.dims = {4 * H, cols};
      if (cols == 1) t.dims = {4 * H};
      for (int g = 0; g < 4; ++g)
        for (int64_t r = 0; r < H * cols; ++r)
          t.values.push_back(v[static_cast<size_t>(offset + order[g] * H * cols + r)]);
      return t;
    };
    Val wih = constant(regate(W->values, I, 0), DType::f32), whh = constant(regate(R->values, H, 0), DType::f32);
    Val bih, bhh;
    if (in(n, 3)) {
      VRUN_ASSIGN_OR_RETURN(const Tensor* B, known_in(n, 3, "B"));
      if (B->numel() != 8 * H) return err(ErrorCode::kInvalidProgram, "LSTM: B must be [1, 8H]");
      bih = constant(regate(B->values, 1, 0), DType::f32);
      bhh = constant(regate(B->values, 1, 4 * H), DType::f32);
    }
    const Shape xs = shape(x);  // [T, B, I]
    if (xs.rank != 3) return err(ErrorCode::kInvalidProgram, "LSTM: X must be [T, B, I]");
    auto state = [&](size_t k) -> Result<Val> {
      if (!in(n, k)) {
        Tensor z;
        z.elem_type = 1;
        z.dims = {xs[1], H};
        z.values.assign(static_cast<size_t>(xs[1] * H), 0.0);
        if (mb_.symbolic_dims(x)[1]) return err(ErrorCode::kUnsupported, "LSTM: a symbolic batch needs initial_h and initial_c");
        return constant(z, DType::f32);
      }
      VRUN_ASSIGN_OR_RETURN(Val s, val_in(n, k));
      return mb_.op(OpKind::select, {s}, {{"axis", 0}, {"index", 0}});
    };
    VRUN_ASSIGN_OR_RETURN(Val h0, state(5));
    VRUN_ASSIGN_OR_RETURN(Val c0, state(6));
    Val xb = mb_.op(OpKind::permute, {x}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
    auto ys = mb_.op_n(OpKind::lstm, {xb, h0, c0, wih, whh, bih, bhh}, {}, n.name);
    if (ys.size() != 3) return pb_.status().is_ok() ? err(ErrorCode::kInternal, "LSTM: expected 3 outputs") : pb_.status();
    // Y [T, 1, B, H], Y_h and Y_c [1, B, H].
    if (n.outputs.size() > 0 && !n.outputs[0].empty()) {
      Val y = mb_.op(OpKind::permute, {ys[0]}, {{"perm", std::vector<int64_t>{1, 0, 2}}});
      VRUN_ASSIGN_OR_RETURN(Val y4, reshape_keep(mb_.op(OpKind::copy, {y}), {xs[0], 1, xs[1], H}, {0, -1, 1, -1}));
      set(n.outputs[0], y4);
    }
    for (size_t k = 1; k < 3 && k < n.outputs.size(); ++k) {
      if (n.outputs[k].empty()) continue;
      VRUN_ASSIGN_OR_RETURN(Val s, reshape_keep(ys[k], {1, xs[1], H}, {-1, 0, 1}));
      set(n.outputs[k], s);
    }
    return Status::ok();
  }
  return err(ErrorCode::kUnsupported, "no mapping onto vrun's ops for this operator");
}

}  // namespace vrun::onnx::detail
