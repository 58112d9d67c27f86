// Helpers for kernel tests: owning host tensors with random (never all-zero) data, strided and
// broadcast views over them, float64 readback, and a runner that infers output shapes, allocates
// and calls the CPU kernel exactly as the executor does.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/cpu/cpu_kernel.h"
#include "kernels/ops/shape_infer.h"
#include "runtime/base/tensor.h"

namespace vrun::test {

// An owning buffer plus a view over it (dense unless reshaped by the helpers below).
struct HostTensor {
  std::shared_ptr<std::vector<uint8_t>> storage;
  TensorView view;

  int64_t numel() const { return view.numel(); }
};

inline HostTensor make_tensor(DType dtype, const Shape& shape) {
  HostTensor t;
  const int64_t bytes = std::max<int64_t>(dtype_bytes(dtype, shape.numel()), 1);
  t.storage = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(bytes + 64));
  t.view = TensorView::dense(t.storage->data(), dtype, shape);
  return t;
}

// Integer dtypes take x rounded and clamped to the int64 range, then wrapped to the width
// (a plain float-to-narrow-int cast of an out-of-range value is undefined behaviour).
// A rank-1 tensor holding `values` (rope frequencies; i32 device positions and offsets).
template <typename T>
inline HostTensor vector_tensor(const std::vector<T>& values) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, int32_t>);
  HostTensor t = make_tensor(std::is_same_v<T, float> ? DType::f32 : DType::i32, Shape{static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.view.ptr<T>());
  return t;
}

// rope's inv_freq for a rotary dim of rd at base 10000, what the rope tests rotate by.
inline std::vector<float> rope_frequencies(int64_t rd) {
  std::vector<float> f;
  for (int64_t i = 0; i < rd / 2; ++i) f.push_back(static_cast<float>(std::pow(10000.0, -2.0 * i / rd)));
  return f;
}

inline int64_t to_wrapped_int(double x) {
  if (!(x == x)) return 0;
  if (x >= 9.2e18) return INT64_MAX;
  if (x <= -9.2e18) return INT64_MIN;
  return static_cast<int64_t>(x);
}

inline void store_double(const TensorView& v, const int64_t* idx, double x) {
  void* p = v.at(idx);
  switch (v.dtype) {
    case DType::f32: *static_cast<float*>(p) = static_cast<float>(x); break;
    case DType::f16: *static_cast<uint16_t*>(p) = f32_to_f16(static_cast<float>(x)); break;
    case DType::bf16: *static_cast<uint16_t*>(p) = f32_to_bf16(static_cast<float>(x)); break;
    case DType::f64: *static_cast<double*>(p) = x; break;
    case DType::i8: *static_cast<int8_t*>(p) = static_cast<int8_t>(to_wrapped_int(x)); break;
    case DType::u8: *static_cast<uint8_t*>(p) = static_cast<uint8_t>(to_wrapped_int(x)); break;
    case DType::bool_: *static_cast<uint8_t*>(p) = x != 0; break;
    case DType::i32: *static_cast<int32_t*>(p) = static_cast<int32_t>(to_wrapped_int(x)); break;
    case DType::i64: *static_cast<int64_t*>(p) = to_wrapped_int(x); break;
    default: ADD_FAILURE() << "store_double: unsupported dtype " << dtype_name(v.dtype);
  }
}

inline double load_double(const TensorView& v, const int64_t* idx) {
  const void* p = v.at(idx);
  switch (v.dtype) {
    case DType::f32: return *static_cast<const float*>(p);
    case DType::f16: return f16_to_f32(*static_cast<const uint16_t*>(p));
    case DType::bf16: return bf16_to_f32(*static_cast<const uint16_t*>(p));
    case DType::f64: return *static_cast<const double*>(p);
    case DType::i8: return *static_cast<const int8_t*>(p);
    case DType::u8: return *static_cast<const uint8_t*>(p);
    case DType::bool_: return *static_cast<const uint8_t*>(p) != 0;
    case DType::i32: return *static_cast<const int32_t*>(p);
    case DType::i64: return static_cast<double>(*static_cast<const int64_t*>(p));
    default: ADD_FAILURE() << "load_double: unsupported dtype " << dtype_name(v.dtype); return 0;
  }
}

// Calls fn(index) for every index of shape in row-major order.
template <typename Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  if (shape.numel() == 0) return;
  int64_t idx[kMaxRank] = {};
  while (true) {
    fn(static_cast<const int64_t*>(idx));
    int d = shape.rank - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Row-major float64 copy of any view (plain dtypes; block-quantised ones are dequantised).
inline std::vector<double> to_doubles(const TensorView& v) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(v.numel()));
  if (is_quantized(v.dtype)) {
    std::vector<float> tmp(static_cast<size_t>(v.numel()));
    dequantize_row(v.dtype, v.data, tmp.data(), v.numel());
    for (float f : tmp) out.push_back(f);
    return out;
  }
  for_each_index(v.shape, [&](const int64_t* i) { out.push_back(load_double(v, i)); });
  return out;
}

// Uniform random values in [lo, hi), rounded to the dtype; integers for int dtypes.
inline HostTensor random_tensor(DType dtype, const Shape& shape, std::mt19937& rng, double lo = -1, double hi = 1) {
  HostTensor t = make_tensor(dtype, shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  if (is_quantized(dtype)) {
    std::vector<float> tmp(static_cast<size_t>(shape.numel()));
    for (auto& x : tmp) x = static_cast<float>(dist(rng));
    quantize_row(dtype, tmp.data(), t.view.data, shape.numel());
    return t;
  }
  for_each_index(shape, [&](const int64_t* i) {
    double x = dist(rng);
    if (!is_float(dtype)) x = std::floor(x);
    store_double(t.view, i, x);
  });
  return t;
}

// A view of `shape` whose memory layout is permuted by `perm` (the storage is dense in the
// permuted order), with `offset` elements of padding before it: exercises strides and offsets.
inline HostTensor random_strided(DType dtype, const Shape& shape, const std::vector<int>& perm, int64_t offset,
                                 std::mt19937& rng) {
  Shape phys;
  phys.rank = shape.rank;
  for (int i = 0; i < shape.rank; ++i) phys[i] = shape[perm[i]];
  HostTensor base = make_tensor(dtype, Shape{phys.numel() + offset});
  const Strides ps = contiguous_strides(phys);
  TensorView v;
  v.dtype = dtype;
  v.shape = shape;
  v.data = static_cast<uint8_t*>(base.storage->data()) + offset * dtype_elem_size(dtype);
  for (int i = 0; i < shape.rank; ++i) v.strides[perm[i]] = ps[i];
  base.view = v;
  std::uniform_real_distribution<double> dist(-1, 1);
  for_each_index(shape, [&](const int64_t* i) { store_double(v, i, dist(rng)); });
  return base;
}

// A view broadcasting `small` (whose rank equals shape's) to `shape` with 0 strides.
inline TensorView broadcast_view(const TensorView& small, const Shape& shape) {
  TensorView v = small;
  v.shape = shape;
  v.strides = broadcast_strides(small.shape, small.strides, shape);
  return v;
}

// Runs op on the CPU the way the executor does: infer shapes, allocate dense outputs, call.
struct RunResult {
  Status status;
  std::vector<HostTensor> outputs;
};

inline RunResult run_cpu(OpKind op, const std::vector<TensorView>& inputs, const Attrs& attrs,
                         ThreadPool* pool = nullptr) {
  RunResult r;
  std::vector<TensorDesc> in_desc(inputs.size());
  std::vector<const TensorDesc*> in_ptrs;
  for (size_t k = 0; k < inputs.size(); ++k) {
    in_desc[k] = {inputs[k].dtype, inputs[k].shape};
    in_ptrs.push_back(inputs[k].present() ? &in_desc[k] : nullptr);
  }
  std::vector<TensorDesc> out_desc;
  r.status = infer_shapes(op, in_ptrs, attrs, &out_desc);
  if (!r.status.is_ok()) return r;
  std::vector<TensorView> outs;
  for (const auto& d : out_desc) {
    r.outputs.push_back(make_tensor(d.dtype, d.shape));
    outs.push_back(r.outputs.back().view);
  }
  CpuKernelFn fn = cpu_kernels().get(op);
  if (!fn) {
    r.status = err(ErrorCode::kUnsupported, "no CPU kernel for ", op_name(op));
    return r;
  }
  KernelCall call;
  call.op = op;
  call.in = inputs.data();
  call.n_in = static_cast<int>(inputs.size());
  call.out = outs.data();
  call.n_out = static_cast<int>(outs.size());
  call.attrs = &attrs;
  call.pool = pool ? pool : &ThreadPool::global();
  r.status = fn(call);
  return r;
}

// Relative-or-absolute closeness: |a - b| <= atol + rtol * |b| for every element.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol,
                         const char* what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same_nonfinite = !std::isfinite(want[i]) && (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])));
    if (same_nonfinite) continue;
    if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]))) {
      if (++bad <= 5) ADD_FAILURE() << what << " element " << i << ": got " << got[i] << " want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

// Refills every element of a view with uniform values in [lo, hi) (integers for int dtypes).
inline void fill_uniform(const TensorView& v, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for_each_index(v.shape, [&](const int64_t* i) {
    double x = dist(rng);
    if (!is_float(v.dtype)) x = std::floor(x);
    store_double(v, i, x);
  });
}

// Memory layouts an input view can have; kernels must read all of them.
enum class Layout {
  kDense,      // contiguous
  kPermuted,   // dims stored in reverse order, with a storage offset
  kBroadcast,  // every other dim (from the last) has stride 0
};

inline const char* layout_name(Layout l) {
  return l == Layout::kDense ? "dense" : l == Layout::kPermuted ? "permuted+offset" : "broadcast";
}

// A random view of `shape` with the given layout, values uniform in [lo, hi).
inline HostTensor random_layout(DType dtype, const Shape& shape, Layout layout, std::mt19937& rng, double lo = -1,
                                double hi = 1) {
  if (layout == Layout::kPermuted && shape.rank > 0) {
    std::vector<int> perm(static_cast<size_t>(shape.rank));
    for (int i = 0; i < shape.rank; ++i) perm[i] = shape.rank - 1 - i;
    HostTensor t = random_strided(dtype, shape, perm, 5, rng);
    fill_uniform(t.view, rng, lo, hi);
    return t;
  }
  if (layout == Layout::kBroadcast && shape.rank > 0) {
    Shape small = shape;
    for (int d = shape.rank - 1; d >= 0; d -= 2) small[d] = 1;
    HostTensor t = random_tensor(dtype, small, rng, lo, hi);
    t.view = broadcast_view(t.view, shape);
    return t;
  }
  return random_tensor(dtype, shape, rng, lo, hi);
}

// rows [m, k] (row-major doubles) normalised in float64 as layer_norm (gamma, beta; beta may be
// empty) or rms_norm (rms true) define them: linear's norm prologue is checked against this.
inline std::vector<double> ref_norm_rows(std::vector<double> x, int64_t m, int64_t k, bool rms, double eps,
                                         const std::vector<double>& gamma, const std::vector<double>& beta) {
  for (int64_t i = 0; i < m; ++i) {
    double* r = x.data() + i * k;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < k; ++j) mean += r[j];
      mean /= static_cast<double>(k);
    }
    for (int64_t j = 0; j < k; ++j) var += (r[j] - mean) * (r[j] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(k) + eps);
    for (int64_t j = 0; j < k; ++j) r[j] = (r[j] - mean) * inv * gamma[j] + (beta.empty() ? 0.0 : beta[j]);
  }
  return x;
}

// The error bound of a quantised-weight dot product of row x (k doubles) with row w: x is
// quantised per block of 32 to 8 bits (error <= amax / 32512 per element), so the bound is
// sum over blocks of amax_b / 32512 * sum_{k in b} |w_k| (with 1% slack).
inline double quant_x_bound(const double* x, const double* w, int64_t k) {
  double bound = 0;
  for (int64_t b0 = 0; b0 < k; b0 += 32) {
    double amax = 0, wsum = 0;
    for (int64_t p = b0; p < b0 + 32 && p < k; ++p) {
      amax = std::max(amax, std::fabs(x[p]));
      wsum += std::fabs(w[p]);
    }
    bound += amax / 32512.0 * wsum * 1.01;
  }
  return bound;
}

// Inputs of linear with act = gelu, bias and residual, and with norm = layer (gamma in
// [0.5, 1.5], beta) when `norm`: x [1, M, K] in [-2, 2], w [N, K] of `wt`; `rows` holds the
// float64 rows the projection reads (x, normalised for a norm).
struct GeluLinearCase {
  HostTensor x, w, b, r, g, be;
  Attrs attrs{OpKind::linear};
  std::vector<double> rows;
};
inline GeluLinearCase make_gelu_linear_case(DType wt, int64_t M, int64_t N, int64_t K, bool norm, std::mt19937& rng,
                                            const char* act = "gelu") {
  GeluLinearCase c;
  c.x = random_tensor(DType::f32, Shape{1, M, K}, rng, -2, 2);
  c.w = random_tensor(wt, Shape{N, K}, rng);
  c.b = random_tensor(DType::f32, Shape{N}, rng);
  c.r = random_tensor(DType::f32, Shape{1, M, N}, rng);
  c.g = random_tensor(DType::f32, Shape{K}, rng, 0.5, 1.5);
  c.be = random_tensor(DType::f32, Shape{K}, rng);
  c.attrs.set_s("act", act);
  if (norm) c.attrs.set_s("norm", "layer");
  c.rows = to_doubles(c.x.view);
  if (norm) c.rows = ref_norm_rows(c.rows, M, K, false, 1e-5, to_doubles(c.g.view), to_doubles(c.be.view));
  return c;
}

inline double gelu_f64(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
inline double silu_f64(double v) { return v / (1.0 + std::exp(-v)); }
// linear's act in float64 ("gelu", "silu", else none).
inline double act_f64(const std::string& act, double v) { return act == "gelu" ? gelu_f64(v) : act == "silu" ? silu_f64(v) : v; }

// Tolerances for results stored in `dtype` from f32 computation: about a few ulp of the
// storage type, relative, with an absolute floor for values near zero.
struct Tolerance {
  double atol, rtol;
};
inline Tolerance tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::f16: return {1e-3, 2e-3};
    case DType::bf16: return {8e-3, 1.6e-2};
    case DType::f64: return {1e-12, 1e-12};
    default: return {1e-5, 2e-5};
  }
}

// float64 reference of slice_update rotating what it writes, for a rank-4 state `before` (shape
// ss): src's rows go in at start along ax, each rotated at the position it lands on (rope's
// angle as the op defines it, float32 position * inv_freq, then cos and sin in float64); rows of
// dim 1 from `heads` on (heads > 0) go in unrotated.
inline std::vector<double> rope_written_state(const std::vector<double>& before, const TensorView& src,
                                              const std::vector<float>& inv_freq, const Shape& ss, int ax, int64_t start,
                                              bool interleaved, int64_t heads) {
  std::vector<double> want;
  const int64_t D = ss[3], half = D / 2;
  size_t k = 0;
  for_each_index(ss, [&](const int64_t* i) {
    int64_t si[4] = {i[0], i[1], i[2], i[3]};
    si[ax] -= start;
    if (si[ax] < 0 || si[ax] >= src.shape[ax]) {
      want.push_back(before[k++]);
      return;
    }
    ++k;
    const double x = load_double(src, si);
    if (heads > 0 && si[1] >= heads) {
      want.push_back(x);
      return;
    }
    const int64_t d = si[3];
    const int64_t f = interleaved ? d / 2 : d % half;
    const bool first = interleaved ? d % 2 == 0 : d < half;
    int64_t pi[4] = {si[0], si[1], si[2], interleaved ? (first ? d + 1 : d - 1) : (first ? d + half : d - half)};
    const double partner = load_double(src, pi);
    const double ang = static_cast<float>(start + si[ax]) * inv_freq[static_cast<size_t>(f)];
    want.push_back(first ? x * std::cos(ang) - partner * std::sin(ang) : x * std::cos(ang) + partner * std::sin(ang));
  });
  return want;
}

}  // namespace vrun::test
