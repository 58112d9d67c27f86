// Unary and binary elementwise ops, and the strided elementwise building block behind copies.
#include <algorithm>
#include <limits>

#include "kernels/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

constexpr int kMaxEltRank = 5;

int unary_code(OpKind op, const Attrs& attrs) {
  switch (op) {
    case OpKind::neg: return OP_NEG;
    case OpKind::abs: return OP_ABS;
    case OpKind::exp: return OP_EXP;
    case OpKind::log: return OP_LOG;
    case OpKind::sqrt: return OP_SQRT;
    case OpKind::rsqrt: return OP_RSQRT;
    case OpKind::reciprocal: return OP_RECIP;
    case OpKind::square: return OP_SQUARE;
    case OpKind::sin: return OP_SIN;
    case OpKind::cos: return OP_COS;
    case OpKind::tanh: return OP_TANH;
    case OpKind::erf: return OP_ERF;
    case OpKind::sigmoid: return OP_SIGMOID;
    case OpKind::relu: return OP_RELU;
    case OpKind::silu: return OP_SILU;
    case OpKind::softplus: return OP_SOFTPLUS;
    case OpKind::gelu: return attrs.s("approximate") == "tanh" ? OP_GELU_TANH : OP_GELU;
    case OpKind::clamp: return OP_CLAMP;
    case OpKind::scale: return OP_SCALE;
    case OpKind::pow_scalar: return OP_POW_SCALAR;
    case OpKind::cast: return OP_COPY;
    default: return -1;
  }
}

int binary_code(OpKind op) {
  switch (op) {
    case OpKind::add: return OP_ADD;
    case OpKind::sub: return OP_SUB;
    case OpKind::mul: return OP_MUL;
    case OpKind::div: return OP_DIV;
    case OpKind::maximum: return OP_MAX;
    case OpKind::minimum: return OP_MIN;
    case OpKind::pow: return OP_POW;
    case OpKind::equal: return OP_EQ;
    case OpKind::less: return OP_LT;
    case OpKind::greater: return OP_GT;
    case OpKind::where: return OP_WHERE;
    default: return -1;
  }
}

}  // namespace

namespace {

// An index on the device that shifts y's offset (the kernel's DYN_Y).
struct DynIndex {
  const DeviceView* index;
  int64_t stride, max_index;
};

Status eltwise(Recorder& rec, int opcode, const DeviceView& y, const DeviceView* a, const DeviceView* b,
               const DeviceView* c, float p0, float p1, const DynIndex* dyn) {
  const int64_t n = y.numel();
  if (n == 0) return Status::ok();
  const DeviceView* views[4] = {&y, a, b, c};
  // Collapse: drop size-1 dims, then merge neighbours that are contiguous in every operand.
  std::vector<int64_t> shape;
  std::vector<std::array<int64_t, 4>> strides;
  for (int d = 0; d < y.shape.rank; ++d) {
    if (y.shape[d] == 1) continue;
    std::array<int64_t, 4> s{};
    for (int k = 0; k < 4; ++k) s[k] = views[k] ? views[k]->strides[d] : 0;
    if (!shape.empty()) {
      bool merge = true;
      for (int k = 0; k < 4; ++k)
        if (strides.back()[k] != s[k] * y.shape[d]) merge = false;
      if (merge) {
        shape.back() *= y.shape[d];
        strides.back() = s;
        continue;
      }
    }
    shape.push_back(y.shape[d]);
    strides.push_back(s);
  }
  if (shape.empty()) {
    shape.push_back(1);
    strides.push_back({});
  }
  if (static_cast<int>(shape.size()) > kMaxEltRank)
    return err(ErrorCode::kUnsupported, "vulkan: elementwise layout of ", y.shape.str(), " needs ", shape.size(),
               " dims after collapsing; the kernel takes ", kMaxEltRank);
  const int rank = static_cast<int>(shape.size());
  for (const auto& s : strides)
    for (int64_t v : s)
      if (v < 0 || v > std::numeric_limits<int32_t>::max())
        return err(ErrorCode::kUnsupported, "vulkan: elementwise stride ", v, " out of the kernel's range");

  std::vector<Binding> bindings = {{&y, true}, {a, false}, {b, false}, {c, false}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  PushWords pw;
  pw.u(static_cast<uint64_t>(n));
  for (int d = 0; d < kMaxEltRank; ++d) pw.u(d < rank ? shape[d] : 1);
  for (int k = 0; k < 4; ++k)
    for (int d = 0; d < kMaxEltRank; ++d) pw.u(d < rank ? strides[d][k] : 0);
  for (int k = 0; k < 4; ++k) pw.u(offs[k]);
  if (dyn) pw.u(static_cast<uint64_t>(dyn->stride)).u(static_cast<uint64_t>(dyn->max_index));
  else pw.f(p0).f(p1);

  int raw = 0;
  if (opcode == OP_COPY && a && a->dtype == y.dtype) raw = dtype_elem_size(y.dtype);
  const std::vector<int32_t> spec = {opcode,           a ? dt_code(*a) : 0, b ? dt_code(*b) : 0, c ? dt_code(*c) : 0,
                                     dt_code(y.dtype), rank,                raw, dyn ? 1 : 0};
  uint32_t gx, gy;
  rec.grid_1d((static_cast<uint64_t>(n) + 255) / 256, &gx, &gy);
  return rec.dispatch("eltwise", spec, bindings, pw.w, pw.bytes(), gx, gy, 1);
}

}  // namespace

bool supports_elementwise(const Context&, OpKind op, const std::vector<const TensorDesc*>& inputs,
                          const Attrs& attrs) {
  const TensorDesc* x = inputs[0];
  auto in = [&](size_t k) { return input_at(inputs, k); };
  if (op_schema(op).family == OpFamily::unary) {
    if (op == OpKind::cast) {
      auto to = dtype_from_name(attrs.s("dtype"));
      return to && (is_act(*to) || *to == DType::i32) &&
             (is_act(x->dtype) || x->dtype == DType::i32 || x->dtype == DType::bool_);
    }
    return is_act(x->dtype);
  }
  if (op == OpKind::where) {
    const TensorDesc *a = in(1), *b = in(2);
    return a && b && (x->dtype == DType::bool_ || x->dtype == DType::u8) && is_act(a->dtype) &&
           a->dtype == b->dtype;
  }
  return in(1) && is_act(x->dtype) && in(1)->dtype == x->dtype;
}

Status record_eltwise(Recorder& rec, int opcode, const DeviceView& y, const DeviceView* a, const DeviceView* b,
                      const DeviceView* c, float p0, float p1) {
  return eltwise(rec, opcode, y, a, b, c, p0, p1, nullptr);
}

Status record_copy_at(Recorder& rec, const DeviceView& y, const DeviceView& src, const DeviceView& index,
                      int64_t stride, int64_t max_index, int index_axis) {
  if (stride < 0 || max_index < 0 || stride * max_index > std::numeric_limits<int32_t>::max())
    return err(ErrorCode::kUnsupported, "vulkan: a copy at a device index with stride ", stride, " and ", max_index,
               " positions is out of the kernel's range");
  // The index is read as one element: its view broadcast over y (0 strides) keeps every dim mergeable.
  DeviceView at = index;
  at.shape = y.shape;
  for (int d = 0; d < y.shape.rank; ++d) at.strides[d] = 0;
  if (index_axis >= 0) at.strides[index_axis] = index.strides[0];  // entry r for row r
  const DynIndex dyn{&at, stride, max_index};
  return eltwise(rec, OP_COPY, y, &src, &at, nullptr, 0, 0, &dyn);
}

Status record_elementwise(Recorder& rec, OpKind op, const std::vector<DeviceView>& in,
                          const std::vector<DeviceView>& out, const Attrs& attrs) {
  const DeviceView& y = out[0];
  if (op_schema(op).family == OpFamily::unary) {
    const int code = unary_code(op, attrs);
    if (code < 0) return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
    float p0 = 0, p1 = 0;
    if (op == OpKind::clamp) {
      p0 = static_cast<float>(attrs.f("min"));
      p1 = static_cast<float>(attrs.f("max"));
    } else if (op == OpKind::scale) {
      p0 = static_cast<float>(attrs.f("scale"));
      p1 = static_cast<float>(attrs.f("bias"));
    } else if (op == OpKind::pow_scalar) {
      p0 = static_cast<float>(attrs.f("exponent"));
    }
    DeviceView a = in[0];
    a.strides = broadcast_strides(a.shape, a.strides, y.shape);
    a.shape = y.shape;
    return record_eltwise(rec, code, y, &a, nullptr, nullptr, p0, p1);
  }
  const int code = binary_code(op);
  if (code < 0) return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
  std::vector<DeviceView> b(in.begin(), in.end());
  for (auto& v : b) {
    if (v.shape.rank > y.shape.rank)
      return err(ErrorCode::kInvalidArgument, "vulkan: ", op_name(op), " input ", v.shape.str(), " has more dims than output ",
                 y.shape.str());
    v.strides = broadcast_strides(v.shape, v.strides, y.shape);
    v.shape = y.shape;
  }
  return record_eltwise(rec, code, y, &b[0], &b[1], b.size() > 2 ? &b[2] : nullptr);
}

}  // namespace vrun::vulkan
