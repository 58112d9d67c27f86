// Unary elementwise kernels (family unary in ops.def, cast included). Each op is a float
// functor applied over the strided iteration of (y, x); f16/bf16 convert on load and store.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/base/convert.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/strided_iter.h"
#include "runtime/base/vec_math.h"

namespace vrun::cpu {

namespace {

// y = f(x) over any view of x; `cost` is the work of one element relative to a copy.
template <typename T, typename F>
void map_unary(const KernelCall& c, int64_t cost, F f) {
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  const StridedIter<2> it(y.shape, {y.strides, x.strides});
  const int64_t xs = it.inner_stride(1);
  it.parallel(
      c.pool,
      [&](const int64_t* off, int64_t n) {
        T* yp = static_cast<T*>(y.data) + off[0];
        const T* xp = static_cast<const T*>(x.data) + off[1];
        if (xs == 1) {
          for (int64_t i = 0; i < n; ++i) yp[i] = from_float<T>(f(to_float(xp[i])));
        } else {
          for (int64_t i = 0; i < n; ++i) yp[i] = from_float<T>(f(to_float(xp[i * xs])));
        }
      },
      cost);
}

constexpr float kSqrt2OverPi = 0.79788456080286536f;

template <typename T>
Status run_float_unary(const KernelCall& c) {
  const Attrs& a = c.attr();
  switch (c.op) {
    case OpKind::neg: map_unary<T>(c, 1, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return -v; }); break;
    case OpKind::abs: map_unary<T>(c, 1, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::fabs(v); }); break;
    case OpKind::exp: map_unary<T>(c, 4, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return exp_fast(v); }); break;
    case OpKind::log: map_unary<T>(c, 8, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::log(v); }); break;
    case OpKind::sqrt: map_unary<T>(c, 2, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::sqrt(v); }); break;
    case OpKind::rsqrt: map_unary<T>(c, 2, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return 1.f / std::sqrt(v); }); break;
    case OpKind::reciprocal: map_unary<T>(c, 2, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return 1.f / v; }); break;
    case OpKind::square: map_unary<T>(c, 1, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return v * v; }); break;
    case OpKind::sin: map_unary<T>(c, 8, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::sin(v); }); break;
    case OpKind::cos: map_unary<T>(c, 8, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::cos(v); }); break;
    case OpKind::tanh: map_unary<T>(c, 8, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::tanh(v); }); break;
    case OpKind::erf: map_unary<T>(c, 8, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::erf(v); }); break;
    case OpKind::sigmoid: map_unary<T>(c, 4, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return sigmoid_fast(v); }); break;
    case OpKind::relu: map_unary<T>(c, 1, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return v > 0.f ? v : (v != v ? v : 0.f); }); break;
    case OpKind::silu: map_unary<T>(c, 4, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return v * sigmoid_fast(v); }); break;
    case OpKind::softplus:
      // torch's default threshold: above 20 softplus(x) == x in float.
      map_unary<T>(c, 8, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return v > 20.f ? v : std::log1p(std::exp(v)); });
      break;
    case OpKind::gelu:
      if (a.s("approximate") == "tanh") {
        map_unary<T>(c, 6, [](float v) VRUN_ALWAYS_INLINE_LAMBDA {
          return 0.5f * v * (1.f + tanh_fast(kSqrt2OverPi * (v + 0.044715f * v * v * v)));
        });
      } else {
        map_unary<T>(c, 8, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return cpu::gelu_erf(v); });
      }
      break;
    case OpKind::clamp: {
      const float lo = static_cast<float>(a.f("min")), hi = static_cast<float>(a.f("max"));
      // torch.clamp: min first, then max (so max wins when min > max); nan passes through.
      map_unary<T>(c, 1, [lo, hi](float v) VRUN_ALWAYS_INLINE_LAMBDA {
        const float t = v < lo ? lo : v;
        return t > hi ? hi : t;
      });
      break;
    }
    case OpKind::scale: {
      const float s = static_cast<float>(a.f("scale")), b = static_cast<float>(a.f("bias"));
      map_unary<T>(c, 1, [s, b](float v) VRUN_ALWAYS_INLINE_LAMBDA { return v * s + b; });
      break;
    }
    case OpKind::pow_scalar: {
      const double e = a.f("exponent");
      if (e == 2.0) {
        map_unary<T>(c, 1, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return v * v; });
      } else if (e == 0.5) {
        map_unary<T>(c, 2, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::sqrt(v); });
      } else if (e == 1.0) {
        map_unary<T>(c, 1, [](float v) VRUN_ALWAYS_INLINE_LAMBDA { return v; });
      } else {
        const float ef = static_cast<float>(e);
        map_unary<T>(c, 8, [ef](float v) VRUN_ALWAYS_INLINE_LAMBDA { return std::pow(v, ef); });
      }
      break;
    }
    default: return err(ErrorCode::kInternal, "unary kernel called for ", op_name(c.op));
  }
  return Status::ok();
}

Status float_unary_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, 1, 1));
  const DType t = c.in[0].dtype;
  if (c.out[0].dtype != t || c.out[0].shape != c.in[0].shape) return unsupported_dtypes(c);
  return for_activation(c, t, [&](auto tag) { return run_float_unary<typename decltype(tag)::type>(c); });
}

// ---- cast

template <typename T>
constexpr bool kIsFloatStorage = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                 std::is_same_v<T, f16_t> || std::is_same_v<T, bf16_t>;

template <typename S>
inline double widen(S v) {
  if constexpr (std::is_same_v<S, double>) return v;
  else if constexpr (kIsFloatStorage<S>) return to_float(v);
  else return static_cast<double>(v);
}

// Float to integer as torch does on CPU for in-range values (truncation toward zero);
// out-of-range and nan saturate instead of being undefined.
template <typename D>
inline D float_to_int(double v) {
  if (v != v) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<D>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<D>::max());
  if (v <= lo) return std::numeric_limits<D>::min();
  if (v >= hi) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

template <typename D, typename S>
inline D convert_value(S v, bool to_bool) {
  if (to_bool) {
    bool nonzero;
    if constexpr (kIsFloatStorage<S>) nonzero = widen(v) != 0.0;
    else nonzero = v != 0;
    // f16/bf16 storage has no conversion from bool (clang instantiates this branch for them too).
    if constexpr (kIsFloatStorage<D>) return from_float<D>(nonzero ? 1.0f : 0.0f);
    else return static_cast<D>(nonzero);
  }
  if constexpr (std::is_same_v<D, double>) {
    return widen(v);
  } else if constexpr (kIsFloatStorage<D>) {
    if constexpr (std::is_same_v<S, double>) return from_float<D>(static_cast<float>(v));
    else if constexpr (kIsFloatStorage<S>) return from_float<D>(to_float(v));
    else return from_float<D>(static_cast<float>(v));
  } else if constexpr (kIsFloatStorage<S>) {
    return float_to_int<D>(widen(v));
  } else {
    return static_cast<D>(v);  // integer narrowing wraps, as torch
  }
}

template <typename D, typename S>
void convert_elems(const TensorView& y, const TensorView& x, ThreadPool* pool, bool to_bool) {
  const StridedIter<2> it(y.shape, {y.strides, x.strides});
  const int64_t xs = it.inner_stride(1);
  it.parallel(pool, [&](const int64_t* off, int64_t n) {
    D* yp = static_cast<D*>(y.data) + off[0];
    const S* xp = static_cast<const S*>(x.data) + off[1];
    if constexpr (std::is_same_v<D, S>) {
      if (xs == 1 && !to_bool) {
        std::copy(xp, xp + n, yp);
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i) yp[i] = convert_value<D>(xp[i * xs], to_bool);
  });
}

Status cast_quantized(const KernelCall& c) {
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  if (!x.is_contiguous())
    return err(ErrorCode::kUnsupported, "cast: a block-quantised input must be dense, got strides of a view of ",
               x.shape.str());
  const int64_t blocks = x.numel() / kQuantBlock;
  const int bb = dtype_info(x.dtype).block_bytes;
  const int ys = dtype_elem_size(y.dtype);
  bool ok = true;
  parallel_range(c.pool, blocks, 64, [&](int64_t b0, int64_t b1) {
    float buf[kQuantBlock * 64];
    for (int64_t b = b0; b < b1; b += 64) {
      const int64_t nb = std::min<int64_t>(64, b1 - b);
      dequantize_row(x.dtype, static_cast<const uint8_t*>(x.data) + b * bb, buf, nb * kQuantBlock);
      if (!store_row_f32(buf, y.dtype, static_cast<uint8_t*>(y.data) + b * kQuantBlock * ys, nb * kQuantBlock))
        ok = false;
    }
  });
  return ok ? Status::ok() : unsupported_dtypes(c);
}

Status cast_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, 1, 1));
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  if (y.shape != x.shape) return err(ErrorCode::kInvalidArgument, "cast: output shape ", y.shape.str(), " != input ", x.shape.str());
  if (is_quantized(y.dtype)) return unsupported_dtypes(c);
  if (is_quantized(x.dtype)) return is_float(y.dtype) ? cast_quantized(c) : unsupported_dtypes(c);
  return convert_view(y, x, c.pool) ? Status::ok() : unsupported_dtypes(c);
}

}  // namespace

bool convert_view(const TensorView& dst, const TensorView& src, ThreadPool* pool) {
  const bool to_bool = dst.dtype == DType::bool_;
  bool src_ok = false;
  const bool dst_ok = dispatch_plain(dst.dtype, [&](auto dtag) {
    using D = typename decltype(dtag)::type;
    src_ok = dispatch_plain(src.dtype, [&](auto stag) { convert_elems<D, typename decltype(stag)::type>(dst, src, pool, to_bool); });
  });
  return dst_ok && src_ok;
}

void register_cpu_unary(CpuKernelTable& t) {
  for (OpKind op : {OpKind::neg, OpKind::abs, OpKind::exp, OpKind::log, OpKind::sqrt, OpKind::rsqrt,
                    OpKind::reciprocal, OpKind::square, OpKind::sin, OpKind::cos, OpKind::tanh, OpKind::erf,
                    OpKind::sigmoid, OpKind::relu, OpKind::silu, OpKind::softplus, OpKind::gelu, OpKind::clamp,
                    OpKind::scale, OpKind::pow_scalar})
    t.set(op, float_unary_kernel);
  t.set(OpKind::cast, cast_kernel);
}

}  // namespace vrun::cpu
