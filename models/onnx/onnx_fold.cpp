#include "models/onnx/onnx_fold.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>

namespace vrun::onnx {

namespace {

int64_t attr_i(const Node& n, const char* name, int64_t dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->i : dflt;
}

Tensor make(int32_t type, std::vector<int64_t> dims, std::vector<double> values) {
  Tensor t;
  t.elem_type = type;
  t.dims = std::move(dims);
  t.values = std::move(values);
  return t;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

Status bad(const char* m) {
  return err(ErrorCode::kInvalidProgram, m);
}

Result<Tensor> binary(const Tensor& a, const Tensor& b, int32_t out_type,
                      const std::function<double(double, double)>& f) {
  VRUN_ASSIGN_OR_RETURN(auto dims, broadcast_dims(a.dims, b.dims));
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  const size_t r = dims.size();
  std::vector<int64_t> ad(r, 1), bd(r, 1);
  std::copy(a.dims.begin(), a.dims.end(), ad.begin() + static_cast<std::ptrdiff_t>(r - a.dims.size()));
  std::copy(b.dims.begin(), b.dims.end(), bd.begin() + static_cast<std::ptrdiff_t>(r - b.dims.size()));
  const auto as = strides_of(ad), bs = strides_of(bd), os = strides_of(dims);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t ia = 0, ib = 0, rem = i;
    for (size_t d = 0; d < r; ++d) {
      const int64_t idx = rem / os[d];
      rem %= os[d];
      if (ad[d] != 1) ia += idx * as[d];
      if (bd[d] != 1) ib += idx * bs[d];
    }
    out[static_cast<size_t>(i)] = f(a.values[static_cast<size_t>(ia)], b.values[static_cast<size_t>(ib)]);
  }
  return make(out_type, dims, std::move(out));
}

int norm_axis(int64_t axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return -1;
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

using Inputs = std::vector<const Tensor*>;
using Folded = Result<std::vector<Tensor>>;

// Input k, or nullptr when absent.
const Tensor* input(const Inputs& in, size_t k) { return k < in.size() ? in[k] : nullptr; }
Result<const Tensor*> need(const Inputs& in, size_t k) {
  if (!input(in, k)) return err(ErrorCode::kInvalidProgram, "input ", k, " is missing");
  return input(in, k);
}

}  // namespace

bool is_int_type(int32_t t) {
  const auto e = static_cast<ElemType>(t);
  return e == ElemType::kInt64 || e == ElemType::kInt32 || e == ElemType::kInt8 || e == ElemType::kUint8 ||
         e == ElemType::kBool;
}

Result<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1)
      return err(ErrorCode::kInvalidProgram, "shapes do not broadcast (", x, " vs ", y, ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

namespace {

Folded fold_constant(const Node& node) {
  for (const auto& a : node.attributes) {
    if (a.name == "value") return std::vector<Tensor>{a.t};
    if (a.name == "value_float") return std::vector<Tensor>{make(1, {}, {a.f})};
    if (a.name == "value_int") return std::vector<Tensor>{make(7, {}, {static_cast<double>(a.i)})};
    if (a.name == "value_floats")
      return std::vector<Tensor>{make(1, {static_cast<int64_t>(a.floats.size())}, a.floats)};
    if (a.name == "value_ints") {
      std::vector<double> v(a.ints.begin(), a.ints.end());
      return std::vector<Tensor>{make(7, {static_cast<int64_t>(v.size())}, v)};
    }
  }
  return err(ErrorCode::kUnsupported, "Constant without a value, value_float(s) or value_int(s) attribute");
}

using BinaryFn = std::function<double(double, double)>;
using UnaryFn = std::function<double(double)>;

// The elementwise operators of two inputs (broadcast) and of one, by their value functions.
const std::map<std::string, BinaryFn>& binary_folds() {
  static const std::map<std::string, BinaryFn> kBinary = {
      {"Add", [](double a, double b) { return a + b; }},
      {"Sub", [](double a, double b) { return a - b; }},
      {"Mul", [](double a, double b) { return a * b; }},
      {"Div", [](double a, double b) { return a / b; }},
      {"Pow", [](double a, double b) { return std::pow(a, b); }},
      {"Max", [](double a, double b) { return std::max(a, b); }},
      {"Min", [](double a, double b) { return std::min(a, b); }},
      {"Equal", [](double a, double b) { return a == b ? 1.0 : 0.0; }},
      {"Less", [](double a, double b) { return a < b ? 1.0 : 0.0; }},
      {"Greater", [](double a, double b) { return a > b ? 1.0 : 0.0; }},
      {"And", [](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; }},
      {"Or", [](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; }}};
  return kBinary;
}

const std::map<std::string, UnaryFn>& unary_folds() {
  static const std::map<std::string, UnaryFn> kUnary = {
      {"Neg", [](double a) { return -a; }},
      {"Sqrt", [](double a) { return std::sqrt(a); }},
      {"Not", [](double a) { return a == 0 ? 1.0 : 0.0; }},
      {"Abs", [](double a) { return std::fabs(a); }},
      {"Identity", [](double a) { return a; }},
      {"Floor", [](double a) { return std::floor(a); }},
      {"Ceil", [](double a) { return std::ceil(a); }},
      {"Reciprocal", [](double a) { return 1.0 / a; }},
      {"Exp", [](double a) { return std::exp(a); }},
      {"Relu", [](double a) { return std::max(a, 0.0); }},
      {"Sigmoid", [](double a) { return 1.0 / (1.0 + std::exp(-a)); }},
      {"Tanh", [](double a) { return std::tanh(a); }}};
  return kUnary;
}

Folded fold_binary(const Node& node, const Inputs& in, const BinaryFn& fn) {
  const std::string& op = node.op_type;
  const Tensor* x = input(in, 0);
  VRUN_ASSIGN_OR_RETURN(const Tensor* b, need(in, 1));
  const bool cmp = op == "Equal" || op == "Less" || op == "Greater" || op == "And" || op == "Or";
  auto f = fn;
  if (op == "Div" && is_int_type(x->elem_type))
    f = [](double a, double b) { return b == 0 ? 0.0 : std::trunc(a / b); };
  VRUN_ASSIGN_OR_RETURN(Tensor t, binary(*x, *b, cmp ? 9 : x->elem_type, f));
  return std::vector<Tensor>{t};
}

Folded fold_unary(const Node& node, const Tensor* x, const UnaryFn& fn) {
  Tensor t = *x;
  for (double& v : t.values) v = fn(v);
  if (node.op_type == "Not") t.elem_type = 9;
  return std::vector<Tensor>{t};
}

Folded fold_size(const Node&, const Inputs& in, int64_t) {
  const Tensor* x = input(in, 0);
  return std::vector<Tensor>{make(7, {}, {static_cast<double>(x->numel())})};
}

Folded fold_cast(const Node& node, const Inputs& in, int64_t) {
  const Tensor* x = input(in, 0);
  Tensor t = *x;
  t.elem_type = static_cast<int32_t>(attr_i(node, "to", 1));
  if (t.elem_type == 9)
    for (double& v : t.values) v = v != 0 ? 1 : 0;
  else if (is_int_type(t.elem_type))
    for (double& v : t.values) v = std::trunc(v);
  else if (t.elem_type == 1)
    for (double& v : t.values) v = static_cast<float>(v);
  return std::vector<Tensor>{t};
}

Folded fold_shape(const Node& node, const Inputs& in, int64_t) {
  const Tensor* x = input(in, 0);
  int64_t r = static_cast<int64_t>(x->dims.size());
  int64_t s = attr_i(node, "start", 0), e = attr_i(node, "end", r);
  if (s < 0) s += r;
  if (e < 0) e += r;
  s = std::clamp<int64_t>(s, 0, r);
  e = std::clamp<int64_t>(e, s, r);
  std::vector<double> v(x->dims.begin() + s, x->dims.begin() + e);
  return std::vector<Tensor>{make(7, {static_cast<int64_t>(v.size())}, v)};
}

Folded fold_constant_of_shape(const Node& node, const Inputs& in, int64_t) {
  const Tensor* x = input(in, 0);
  const auto dims = ints_of(*x);
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 31) / d))
      return bad("ConstantOfShape: bad or too large shape");
    n *= d;
  }
  const Attribute* a = node.attr("value");
  const double v = a && !a->t.values.empty() ? a->t.values[0] : 0.0;
  return std::vector<Tensor>{
      make(a ? a->t.elem_type : 1, dims, std::vector<double>(static_cast<size_t>(n), v))};
}

// Unsqueeze and Squeeze.
Folded fold_squeeze(const Node& node, const Inputs& in, int64_t) {
  const std::string& op = node.op_type;
  const Tensor* x = input(in, 0);
  std::vector<int64_t> axes;
  if (const Attribute* a = node.attr("axes"))
    axes = a->ints;
  else if (input(in, 1))
    axes = ints_of(*input(in, 1));
  Tensor t = *x;
  if (op == "Unsqueeze") {
    const size_t r = x->dims.size() + axes.size();
    std::vector<bool> is_new(r, false);
    for (int64_t a : axes) {
      const int ax = norm_axis(a, r);
      if (ax < 0) return bad("Unsqueeze: axis out of range");
      is_new[static_cast<size_t>(ax)] = true;
    }
    t.dims.clear();
    size_t k = 0;
    for (size_t i = 0; i < r; ++i)
      t.dims.push_back(is_new[i] ? 1 : (k < x->dims.size() ? x->dims[k++] : 1));
  } else {
    std::vector<bool> drop(x->dims.size(), axes.empty());
    for (int64_t a : axes) {
      const int ax = norm_axis(a, x->dims.size());
      if (ax < 0 || x->dims[static_cast<size_t>(ax)] != 1)
        return bad("Squeeze: axis out of range or not of size 1");
      drop[static_cast<size_t>(ax)] = true;
    }
    t.dims.clear();
    for (size_t i = 0; i < x->dims.size(); ++i)
      if (!drop[i] || x->dims[i] != 1) t.dims.push_back(x->dims[i]);
  }
  return std::vector<Tensor>{t};
}

// Reshape and Flatten.
Folded fold_reshape(const Node& node, const Inputs& in, int64_t) {
  const std::string& op = node.op_type;
  const Tensor* x = input(in, 0);
  std::vector<int64_t> shape;
  if (op == "Flatten") {
    const int ax = norm_axis(attr_i(node, "axis", 1), x->dims.size() + 1);
    if (ax < 0) return bad("Flatten: axis out of range");
    int64_t a = 1;
    for (int i = 0; i < ax; ++i) a *= x->dims[static_cast<size_t>(i)];
    shape = {a, -1};
  } else {
    VRUN_ASSIGN_OR_RETURN(const Tensor* s, need(in, 1));
    shape = ints_of(*s);
  }
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && attr_i(node, "allowzero", 0) == 0) {
      if (i >= x->dims.size()) return bad("Reshape: 0 past the input's rank");
      shape[i] = x->dims[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return bad("Reshape: more than one -1");
      infer = static_cast<int>(i);
    } else if (shape[i] < 0) {
      return bad("Reshape: negative dim");
    } else {
      known *= shape[i];
    }
  }
  if (infer >= 0) shape[static_cast<size_t>(infer)] = known ? x->numel() / known : 0;
  Tensor t = *x;
  t.dims = shape;
  if (t.numel() != x->numel()) return bad("Reshape: element count changes");
  return std::vector<Tensor>{t};
}

Folded fold_concat(const Node& node, const Inputs& in, int64_t) {
  const Tensor* x = input(in, 0);
  const int ax = norm_axis(attr_i(node, "axis", 0), x->dims.size());
  if (ax < 0) return bad("Concat: axis out of range");
  Tensor t = *x;
  t.dims[static_cast<size_t>(ax)] = 0;
  for (const Tensor* p : in) {
    if (!p || p->dims.size() != x->dims.size()) return bad("Concat: inputs differ in rank");
    t.dims[static_cast<size_t>(ax)] += p->dims[static_cast<size_t>(ax)];
  }
  int64_t outer = 1;
  for (int i = 0; i < ax; ++i) outer *= x->dims[static_cast<size_t>(i)];
  t.values.clear();
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor* p : in) {
      const int64_t chunk = outer ? p->numel() / outer : 0;
      t.values.insert(t.values.end(), p->values.begin() + o * chunk, p->values.begin() + (o + 1) * chunk);
    }
  if (t.values.size() != static_cast<size_t>(t.numel()))
    return bad("Concat: inputs differ in their other dims");
  return std::vector<Tensor>{t};
}

Folded fold_gather(const Node& node, const Inputs& in, int64_t) {
  const Tensor* x = input(in, 0);
  VRUN_ASSIGN_OR_RETURN(const Tensor* idx, need(in, 1));
  const int ax = norm_axis(attr_i(node, "axis", 0), x->dims.size());
  if (ax < 0) return bad("Gather: axis out of range");
  const int64_t n = x->dims[static_cast<size_t>(ax)];
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= x->dims[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(ax) + 1; i < x->dims.size(); ++i) inner *= x->dims[i];
  Tensor t;
  t.elem_type = x->elem_type;
  t.dims.assign(x->dims.begin(), x->dims.begin() + ax);
  t.dims.insert(t.dims.end(), idx->dims.begin(), idx->dims.end());
  t.dims.insert(t.dims.end(), x->dims.begin() + ax + 1, x->dims.end());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j : ints_of(*idx)) {
      if (j < 0) j += n;
      if (j < 0 || j >= n) return bad("Gather: index out of range");
      for (int64_t k = 0; k < inner; ++k)
        t.values.push_back(x->values[static_cast<size_t>((o * n + j) * inner + k)]);
    }
  return std::vector<Tensor>{t};
}

Folded fold_slice(const Node& node, const Inputs& in, int64_t opset) {
  const Tensor* x = input(in, 0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (opset < 10) {
    if (const Attribute* a = node.attr("starts")) starts = a->ints;
    if (const Attribute* a = node.attr("ends")) ends = a->ints;
    if (const Attribute* a = node.attr("axes")) axes = a->ints;
  } else {
    VRUN_ASSIGN_OR_RETURN(const Tensor* s, need(in, 1));
    VRUN_ASSIGN_OR_RETURN(const Tensor* e, need(in, 2));
    starts = ints_of(*s);
    ends = ints_of(*e);
    if (input(in, 3)) axes = ints_of(*input(in, 3));
    if (input(in, 4)) steps = ints_of(*input(in, 4));
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return bad("Slice: starts, ends, axes and steps differ in length");
  const size_t r = x->dims.size();
  std::vector<int64_t> lo(r, 0), step(r, 1), count(x->dims);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int ax = norm_axis(axes[k], r);
    if (ax < 0 || steps[k] == 0) return bad("Slice: axis out of range or step 0");
    const int64_t n = x->dims[static_cast<size_t>(ax)];
    int64_t s = starts[k], e = ends[k];
    if (s < 0) s += n;
    if (e < 0 && e != INT64_MIN) e += n;
    if (steps[k] > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      count[static_cast<size_t>(ax)] = e > s ? (e - s + steps[k] - 1) / steps[k] : 0;
    } else {
      s = std::clamp<int64_t>(s, -1, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      count[static_cast<size_t>(ax)] = s > e ? (s - e + (-steps[k]) - 1) / (-steps[k]) : 0;
    }
    lo[static_cast<size_t>(ax)] = s;
    step[static_cast<size_t>(ax)] = steps[k];
  }
  Tensor t;
  t.elem_type = x->elem_type;
  t.dims = count;
  const auto xs = strides_of(x->dims), ts = strides_of(count);
  const int64_t total = t.numel();
  for (int64_t i = 0; i < total; ++i) {
    int64_t src = 0, rem = i;
    for (size_t d = 0; d < r; ++d) {
      const int64_t idx = rem / ts[d];
      rem %= ts[d];
      src += (lo[d] + idx * step[d]) * xs[d];
    }
    t.values.push_back(x->values[static_cast<size_t>(src)]);
  }
  return std::vector<Tensor>{t};
}

Folded fold_transpose(const Node& node, const Inputs& in, int64_t) {
  const Tensor* x = input(in, 0);
  const size_t r = x->dims.size();
  std::vector<int64_t> perm;
  if (const Attribute* a = node.attr("perm"))
    perm = a->ints;
  else
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  if (perm.size() != r) return bad("Transpose: perm length differs from rank");
  Tensor t;
  t.elem_type = x->elem_type;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(r)) return bad("Transpose: perm out of range");
    t.dims.push_back(x->dims[static_cast<size_t>(p)]);
  }
  const auto xs = strides_of(x->dims), ts = strides_of(t.dims);
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t src = 0, rem = i;
    for (size_t d = 0; d < r; ++d) {
      const int64_t idx = rem / ts[d];
      rem %= ts[d];
      src += idx * xs[static_cast<size_t>(perm[d])];
    }
    t.values.push_back(x->values[static_cast<size_t>(src)]);
  }
  return std::vector<Tensor>{t};
}

Folded fold_range(const Node&, const Inputs& in, int64_t) {
  VRUN_ASSIGN_OR_RETURN(const Tensor* s, need(in, 0));
  VRUN_ASSIGN_OR_RETURN(const Tensor* l, need(in, 1));
  VRUN_ASSIGN_OR_RETURN(const Tensor* d, need(in, 2));
  if (s->values.empty() || l->values.empty() || d->values.empty() || d->values[0] == 0)
    return bad("Range: bad inputs");
  const double n = std::max(0.0, std::ceil((l->values[0] - s->values[0]) / d->values[0]));
  if (n > 1 << 24) return bad("Range: too many elements");
  std::vector<double> v;
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i)
    v.push_back(s->values[0] + static_cast<double>(i) * d->values[0]);
  return std::vector<Tensor>{make(s->elem_type, {static_cast<int64_t>(v.size())}, v)};
}

}  // namespace

Result<std::vector<Tensor>> fold_node(const Node& node, const std::vector<const Tensor*>& in, int64_t opset) {
  using Fold = Folded (*)(const Node&, const Inputs&, int64_t);
  static const std::map<std::string, Fold> kFolds = {
      {"Cast", fold_cast},         {"Shape", fold_shape},       {"Size", fold_size},
      {"ConstantOfShape", fold_constant_of_shape},              {"Unsqueeze", fold_squeeze},
      {"Squeeze", fold_squeeze},   {"Reshape", fold_reshape},   {"Flatten", fold_reshape},
      {"Concat", fold_concat},     {"Gather", fold_gather},     {"Slice", fold_slice},
      {"Transpose", fold_transpose}, {"Range", fold_range}};
  const std::string& op = node.op_type;
  const Tensor* x = input(in, 0);
  if (op == "Constant") return fold_constant(node);
  if (!x && op != "Range") return err(ErrorCode::kInvalidProgram, "input 0 is missing");
  if (auto it = binary_folds().find(op); it != binary_folds().end()) return fold_binary(node, in, it->second);
  if (auto it = unary_folds().find(op); it != unary_folds().end()) return fold_unary(node, x, it->second);
  if (auto it = kFolds.find(op); it != kFolds.end()) return it->second(node, in, opset);
  return err(ErrorCode::kUnsupported, "no import-time evaluation");
}

int64_t int_of(double d) {
  return std::isnan(d) || d <= -9.2e18 ? INT64_MIN : d >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(d);
}

std::vector<int64_t> ints_of(const Tensor& t) {
  std::vector<int64_t> v;
  v.reserve(t.values.size());
  for (double d : t.values) v.push_back(int_of(d));
  return v;
}

}  // namespace vrun::onnx
