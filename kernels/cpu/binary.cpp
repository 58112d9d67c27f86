// Binary elementwise kernels with numpy broadcasting (family binary in ops.def). Operands are
// read through broadcast strides; the inner loop has fast paths for the three common layouts
// (all contiguous, b a scalar along the row, a a scalar along the row).
#include <cmath>
#include <type_traits>

#include "runtime/base/convert.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/strided_iter.h"

namespace vrun::cpu {

namespace {

// Compute type: f32 for the float storage types, the integer itself otherwise.
template <typename T>
using compute_t = std::conditional_t<std::is_integral_v<T>, T, float>;

template <typename T>
inline compute_t<T> load(T v) {
  if constexpr (std::is_integral_v<T>) return v;
  else return to_float(v);
}
template <typename T>
inline T store(compute_t<T> v) {
  if constexpr (std::is_integral_v<T>) return v;
  else return from_float<T>(v);
}

// Integer add/sub/mul wrap (two's complement) instead of overflowing into undefined behaviour.
template <typename C>
inline C wrap_add(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) + static_cast<std::make_unsigned_t<C>>(b));
  else return a + b;
}
template <typename C>
inline C wrap_sub(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) - static_cast<std::make_unsigned_t<C>>(b));
  else return a - b;
}
template <typename C>
inline C wrap_mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) * static_cast<std::make_unsigned_t<C>>(b));
  else return a * b;
}
// torch.maximum/minimum propagate nan.
template <typename C>
inline C max_nan(C a, C b) {
  if constexpr (std::is_integral_v<C>) return a > b ? a : b;
  else return (a != a || a > b) ? a : b;
}
template <typename C>
inline C min_nan(C a, C b) {
  if constexpr (std::is_integral_v<C>) return a < b ? a : b;
  else return (a != a || a < b) ? a : b;
}

// y = f(a, b) with Y the output storage type (T or uint8_t for comparisons).
template <typename T, typename Y, typename F>
void map_binary(const KernelCall& c, int64_t cost, F f) {
  const TensorView& a = c.in[0];
  const TensorView& b = c.in[1];
  const TensorView& y = c.out[0];
  const StridedIter<3> it(y.shape, {y.strides, broadcast_strides(a.shape, a.strides, y.shape),
                                    broadcast_strides(b.shape, b.strides, y.shape)});
  const int64_t as = it.inner_stride(1), bs = it.inner_stride(2);
  auto out = [](auto v) VRUN_ALWAYS_INLINE_LAMBDA {
    if constexpr (std::is_same_v<Y, T>) return store<T>(v);
    else return static_cast<Y>(v);
  };
  it.parallel(
      c.pool,
      [&](const int64_t* off, int64_t n) {
        Y* yp = static_cast<Y*>(y.data) + off[0];
        const T* ap = static_cast<const T*>(a.data) + off[1];
        const T* bp = static_cast<const T*>(b.data) + off[2];
        if (as == 1 && bs == 1) {
          for (int64_t i = 0; i < n; ++i) yp[i] = out(f(load(ap[i]), load(bp[i])));
        } else if (as == 1 && bs == 0) {
          const auto bv = load(bp[0]);
          for (int64_t i = 0; i < n; ++i) yp[i] = out(f(load(ap[i]), bv));
        } else if (as == 0 && bs == 1) {
          const auto av = load(ap[0]);
          for (int64_t i = 0; i < n; ++i) yp[i] = out(f(av, load(bp[i])));
        } else {
          for (int64_t i = 0; i < n; ++i) yp[i] = out(f(load(ap[i * as]), load(bp[i * bs])));
        }
      },
      cost);
}

template <typename T>
Status run_binary(const KernelCall& c) {
  using C = compute_t<T>;
  switch (c.op) {
    case OpKind::add: map_binary<T, T>(c, 1, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return wrap_add(x, y); }); break;
    case OpKind::sub: map_binary<T, T>(c, 1, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return wrap_sub(x, y); }); break;
    case OpKind::mul: map_binary<T, T>(c, 1, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return wrap_mul(x, y); }); break;
    case OpKind::maximum: map_binary<T, T>(c, 1, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return max_nan(x, y); }); break;
    case OpKind::minimum: map_binary<T, T>(c, 1, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return min_nan(x, y); }); break;
    case OpKind::equal: map_binary<T, uint8_t>(c, 1, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return x == y; }); break;
    case OpKind::less: map_binary<T, uint8_t>(c, 1, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return x < y; }); break;
    case OpKind::greater: map_binary<T, uint8_t>(c, 1, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return x > y; }); break;
    case OpKind::div:
    case OpKind::pow:
      if constexpr (std::is_integral_v<T>) {
        return unsupported_dtypes(c);
      } else if (c.op == OpKind::div) {
        map_binary<T, T>(c, 2, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return x / y; });
      } else {
        map_binary<T, T>(c, 8, [](C x, C y) VRUN_ALWAYS_INLINE_LAMBDA { return std::pow(x, y); });
      }
      break;
    default: return err(ErrorCode::kInternal, "binary kernel called for ", op_name(c.op));
  }
  return Status::ok();
}

Status binary_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 2, 2, 1));
  const DType t = c.in[0].dtype;
  const bool cmp = c.op == OpKind::equal || c.op == OpKind::less || c.op == OpKind::greater;
  if (c.in[1].dtype != t || c.out[0].dtype != (cmp ? DType::bool_ : t)) return unsupported_dtypes(c);
  Status st;
  bool ok = dispatch_activation(t, [&](auto tag) { st = run_binary<typename decltype(tag)::type>(c); });
  if (!ok && t == DType::i32) ok = true, st = run_binary<int32_t>(c);
  if (!ok && t == DType::i64) ok = true, st = run_binary<int64_t>(c);
  return ok ? st : unsupported_dtypes(c);
}

// where copies elements of a or b whole, so it works on the storage size alone.
template <typename E>
void run_where(const KernelCall& c) {
  const TensorView& cond = c.in[0];
  const TensorView& a = c.in[1];
  const TensorView& b = c.in[2];
  const TensorView& y = c.out[0];
  const StridedIter<4> it(y.shape, {y.strides, broadcast_strides(cond.shape, cond.strides, y.shape),
                                    broadcast_strides(a.shape, a.strides, y.shape),
                                    broadcast_strides(b.shape, b.strides, y.shape)});
  const int64_t cs = it.inner_stride(1), as = it.inner_stride(2), bs = it.inner_stride(3);
  it.parallel(c.pool, [&](const int64_t* off, int64_t n) {
    E* yp = static_cast<E*>(y.data) + off[0];
    const uint8_t* cp = static_cast<const uint8_t*>(cond.data) + off[1];
    const E* ap = static_cast<const E*>(a.data) + off[2];
    const E* bp = static_cast<const E*>(b.data) + off[3];
    if (cs == 1 && as == 1 && bs == 1) {
      for (int64_t i = 0; i < n; ++i) yp[i] = cp[i] ? ap[i] : bp[i];
    } else {
      for (int64_t i = 0; i < n; ++i) yp[i] = cp[i * cs] ? ap[i * as] : bp[i * bs];
    }
  });
}

Status where_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 3, 3, 1));
  const DType ct = c.in[0].dtype, t = c.in[1].dtype;
  if ((ct != DType::bool_ && ct != DType::u8) || c.in[2].dtype != t || c.out[0].dtype != t) return unsupported_dtypes(c);
  switch (dtype_elem_size(t)) {
    case 1: run_where<uint8_t>(c); break;
    case 2: run_where<uint16_t>(c); break;
    case 4: run_where<uint32_t>(c); break;
    case 8: run_where<uint64_t>(c); break;
    default: return unsupported_dtypes(c);
  }
  return Status::ok();
}

}  // namespace

void register_cpu_binary(CpuKernelTable& t) {
  for (OpKind op : {OpKind::add, OpKind::sub, OpKind::mul, OpKind::div, OpKind::maximum, OpKind::minimum, OpKind::pow,
                    OpKind::equal, OpKind::less, OpKind::greater})
    t.set(op, binary_kernel);
  t.set(OpKind::where, where_kernel);
}

}  // namespace vrun::cpu
