// Reductions (sum/mean/max/min over axes), argmax and softmax/log_softmax along one axis.
// Every output element reduces a strided sub-space of x; the sub-space is walked as coalesced
// rows, so the common case (reducing the last, contiguous dim) is one unit-stride row that the
// lane accumulators below turn into vector code. Statistics are kept in f32 lanes.
#include <immintrin.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "runtime/base/convert.h"
#include "runtime/base/cpu_features.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/strided_iter.h"
#include "runtime/base/vec_math.h"

namespace vrun::cpu {

namespace {

constexpr int kLanes = 16;
constexpr int64_t kChunk = 512;

// Independent lane accumulators: the compiler vectorises them without reassociating floats.
struct SumAcc {
  float l[kLanes] = {};
  void add(const float* p, int64_t n) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) l[j] += p[i + j];
    for (; i < n; ++i) l[i % kLanes] += p[i];
  }
  float result() const {
    double s = 0;
    for (float v : l) s += v;
    return static_cast<float>(s);
  }
};

// max/min that propagate nan, as torch.max/min do.
inline float pick_max(float acc, float v) { return select((v > acc) | (v != v), v, acc); }
inline float pick_min(float acc, float v) { return select((v < acc) | (v != v), v, acc); }

template <bool kMax>
struct ExtremeAcc {
  float l[kLanes];
  ExtremeAcc() {
    for (float& v : l) v = kMax ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  static float pick(float a, float v) { return kMax ? pick_max(a, v) : pick_min(a, v); }
  void add(const float* p, int64_t n) {
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
      for (int j = 0; j < kLanes; ++j) l[j] = pick(l[j], p[i + j]);
    for (; i < n; ++i) l[0] = pick(l[0], p[i]);
  }
  float result() const {
    float r = l[0];
    for (int j = 1; j < kLanes; ++j) r = pick(r, l[j]);
    return r;
  }
};

template <typename T, typename Acc>
void accumulate_row(const T* p, int64_t n, int64_t stride, Acc& acc) {
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1) {
      acc.add(p, n);
      return;
    }
  }
  float buf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t len = std::min(kChunk, n - i);
    load_row(p + i * stride, stride, buf, len);
    acc.add(buf, len);
  }
}

// x's shape with the reduced dims set to 1: the keepdim output shape, whose dense layout is
// also the layout of the squeezed output.
Shape keep_shape(const Shape& x, const bool* reduced) {
  Shape s = x;
  for (int d = 0; d < x.rank; ++d)
    if (reduced[d]) s[d] = 1;
  return s;
}

template <typename T, typename Acc>
void reduce_axes(const KernelCall& c, const bool* reduced, bool mean) {
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  Shape inner;
  Strides inner_strides;
  for (int d = 0; d < x.rank(); ++d)
    if (reduced[d]) {
      inner_strides[inner.rank] = x.strides[d];
      inner.dims[inner.rank++] = x.shape[d];
    }
  const StridedIter<1> rit(inner, {inner_strides});
  const int64_t count = inner.numel();
  const Shape outer = keep_shape(x.shape, reduced);
  const StridedIter<2> oit(outer, {contiguous_strides(outer), x.strides});
  const int64_t ys = oit.inner_stride(0), xs = oit.inner_stride(1), rs = rit.inner_stride(0);
  T* yp = static_cast<T*>(y.data);
  const T* xp = static_cast<const T*>(x.data);
  oit.parallel(
      c.pool,
      [&](const int64_t* off, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const T* base = xp + off[1] + i * xs;
          Acc acc;
          rit.for_range(0, count, [&](const int64_t* roff, int64_t len) { accumulate_row(base + roff[0], len, rs, acc); });
          float r = acc.result();
          if (mean) r = count ? r / static_cast<float>(count) : std::numeric_limits<float>::quiet_NaN();
          yp[off[0] + i * ys] = from_float<T>(r);
        }
      },
      std::max<int64_t>(count, 1));
}

Status reduce_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, 1, 1));
  const TensorView& x = c.in[0];
  if (c.out[0].dtype != x.dtype) return unsupported_dtypes(c);
  bool reduced[kMaxRank] = {};
  const auto& axes = c.attr().ints("axes");
  for (int d = 0; d < x.rank(); ++d) reduced[d] = axes.empty();
  for (int64_t a : axes) {
    const int ax = normalize_axis(a, x.rank());
    if (ax < 0) return err(ErrorCode::kInvalidArgument, op_name(c.op), ": axis ", a, " out of range for ", x.shape.str());
    reduced[ax] = true;
  }
  if (c.out[0].numel() != keep_shape(x.shape, reduced).numel())
    return err(ErrorCode::kInvalidArgument, op_name(c.op), ": output ", c.out[0].shape.str(), " does not match x ",
               x.shape.str());
  return for_activation(c, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (c.op) {
      case OpKind::reduce_sum: reduce_axes<T, SumAcc>(c, reduced, false); break;
      case OpKind::reduce_mean: reduce_axes<T, SumAcc>(c, reduced, true); break;
      case OpKind::reduce_max: reduce_axes<T, ExtremeAcc<true>>(c, reduced, false); break;
      default: reduce_axes<T, ExtremeAcc<false>>(c, reduced, false); break;
    }
  });
}

// Rows along one axis: calls row(x_row, x_stride, y_offset, y_stride, n) for every position of
// the other dims, in parallel when large.
struct AxisRows {
  Shape outer;
  int64_t n = 0, x_stride = 0, y_stride = 0;
};

AxisRows axis_rows(const TensorView& x, int ax, const Shape& y_keep) {
  AxisRows r;
  r.outer = x.shape;
  r.outer[ax] = 1;
  r.n = x.shape[ax];
  r.x_stride = x.strides[ax];
  r.y_stride = contiguous_strides(y_keep)[ax];
  return r;
}

// The first maximum wins; nan counts as the maximum (torch.argmax), or with nan_flag a row
// holding a NaN gives -1. A dense f32 row (a language model's logits, the greedy token) takes the
// largest value over eight independent lanes, then the first index holding it or the first NaN:
// the one-lane loop waits on every comparison.
template <typename T>
int64_t argmax_row(const T* p, int64_t n, int64_t stride, bool nan_flag) {
  if constexpr (std::is_same_v<T, float>) {
    if (stride == 1 && n >= 64) {
      float lane[8];
      bool nan = false;
      for (float& l : lane) l = p[0];
      int64_t j = 0;
      for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; ++k) {
          nan |= p[j + k] != p[j + k];
          lane[k] = p[j + k] > lane[k] ? p[j + k] : lane[k];
        }
      float m = lane[0];
      for (int k = 1; k < 8; ++k) m = lane[k] > m ? lane[k] : m;
      for (; j < n; ++j) {
        nan |= p[j] != p[j];
        m = p[j] > m ? p[j] : m;
      }
      if (nan && nan_flag) return -1;
      for (j = 0; j < n; ++j)
        if (nan ? p[j] != p[j] : p[j] == m) return j;
      return 0;
    }
  }
  float best = to_float(p[0]);
  int64_t best_i = 0;
  for (int64_t j = 1; j < n && best == best; ++j) {
    const float v = to_float(p[j * stride]);
    if (v > best || v != v) {
      best = v;
      best_i = j;
    }
  }
  return nan_flag && best != best ? -1 : best_i;
}

template <typename T>
void argmax_rows(const KernelCall& c, int ax) {
  const TensorView& x = c.in[0];
  const AxisRows r = axis_rows(x, ax, x.shape);
  const StridedIter<2> oit(r.outer, {contiguous_strides(r.outer), x.strides});
  const int64_t ys = oit.inner_stride(0), xs = oit.inner_stride(1);
  int32_t* yp = static_cast<int32_t*>(c.out[0].data);
  const T* xp = static_cast<const T*>(x.data);
  const bool nan_flag = c.attr().i("nan_flag") != 0;
  oit.parallel(
      c.pool,
      [&](const int64_t* off, int64_t cnt) {
        for (int64_t i = 0; i < cnt; ++i) {
          const T* p = xp + off[1] + i * xs;
          yp[off[0] + i * ys] = static_cast<int32_t>(argmax_row(p, r.n, r.x_stride, nan_flag));
        }
      },
      r.n);
}

Status argmax_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, 1, 1));
  const TensorView& x = c.in[0];
  const int ax = normalize_axis(c.attr().i("axis"), x.rank());
  if (ax < 0 || x.shape[ax] == 0 || x.shape[ax] > std::numeric_limits<int32_t>::max())
    return err(ErrorCode::kInvalidArgument, "argmax: axis ", c.attr().i("axis"), " invalid for x ", x.shape.str());
  if (c.out[0].dtype != DType::i32) return unsupported_dtypes(c);
  return for_activation(c, x.dtype, [&](auto tag) { argmax_rows<typename decltype(tag)::type>(c, ax); });
}

float row_max_generic(const float* p, int64_t n) {
  ExtremeAcc<true> acc;
  acc.add(p, n);
  return acc.result();
}
void exp_shift_generic(float* b, int64_t n, float m) {
  for (int64_t j = 0; j < n; ++j) b[j] = exp_fast(b[j] - m);
}
// The same loops compiled for AVX2 (the rest of the file targets the baseline ISA): 8 lanes
// instead of 4, the same operations per element, so the results are identical.
VRUN_AVX2 float row_max_avx2(const float* p, int64_t n) {
  // max_ps drops NaNs one way or the other; they are tracked apart so the row's max is NaN
  // whenever the row holds one, as in the generic loop.
  __m256 mx = _mm256_set1_ps(-std::numeric_limits<float>::infinity()), nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(p + i);
    mx = _mm256_max_ps(mx, v);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  if (_mm256_movemask_ps(nan)) return std::numeric_limits<float>::quiet_NaN();
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mx);
  float r = lanes[0];
  for (int j = 1; j < 8; ++j) r = pick_max(r, lanes[j]);
  for (; i < n; ++i) r = pick_max(r, p[i]);
  return r;
}
VRUN_AVX2 void exp_shift_avx2(float* b, int64_t n, float m) {
  for (int64_t j = 0; j < n; ++j) b[j] = exp_fast(b[j] - m);
}
float row_max(const float* p, int64_t n) { return cpu_has_avx2() ? row_max_avx2(p, n) : row_max_generic(p, n); }
void exp_shift(float* b, int64_t n, float m) {
  if (cpu_has_avx2()) exp_shift_avx2(b, n, m);
  else exp_shift_generic(b, n, m);
}

template <typename T>
void softmax_rows(const KernelCall& c, int ax, bool log) {
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  const AxisRows r = axis_rows(x, ax, y.shape);
  const StridedIter<2> oit(r.outer, {contiguous_strides(y.shape), x.strides});
  const int64_t ys = oit.inner_stride(0), xs = oit.inner_stride(1);
  T* yp = static_cast<T*>(y.data);
  const T* xp = static_cast<const T*>(x.data);
  const int64_t n = r.n;
  oit.parallel(
      c.pool,
      [&](const int64_t* off, int64_t cnt) {
        std::vector<float> buf(static_cast<size_t>(n));
        float* b = buf.data();
        for (int64_t i = 0; i < cnt; ++i) {
          load_row(xp + off[1] + i * xs, r.x_stride, b, n);
          const float m = row_max(b, n);
          SumAcc sum;
          if (log) {
            float e[kChunk];
            for (int64_t k = 0; k < n; k += kChunk) {
              const int64_t len = std::min(kChunk, n - k);
              for (int64_t j = 0; j < len; ++j) e[j] = exp_fast(b[k + j] - m);
              sum.add(e, len);
            }
            const float lse = m + std::log(sum.result());
            for (int64_t j = 0; j < n; ++j) b[j] -= lse;
          } else {
            exp_shift(b, n, m);
            sum.add(b, n);
            const float inv = 1.f / sum.result();
            for (int64_t j = 0; j < n; ++j) b[j] *= inv;
          }
          T* out = yp + off[0] + i * ys;
          if (r.y_stride == 1) {
            store_row(b, out, n);
          } else {
            for (int64_t j = 0; j < n; ++j) out[j * r.y_stride] = from_float<T>(b[j]);
          }
        }
      },
      std::max<int64_t>(4 * n, 1));
}

Status softmax_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, 1, 1));
  const TensorView& x = c.in[0];
  const int ax = normalize_axis(c.attr().i("axis"), x.rank());
  if (ax < 0) return err(ErrorCode::kInvalidArgument, op_name(c.op), ": axis ", c.attr().i("axis"), " out of range for x ", x.shape.str());
  if (c.out[0].dtype != x.dtype || c.out[0].shape != x.shape) return unsupported_dtypes(c);
  if (x.shape[ax] == 0) return Status::ok();
  const bool log = c.op == OpKind::log_softmax;
  return for_activation(c, x.dtype, [&](auto tag) { softmax_rows<typename decltype(tag)::type>(c, ax, log); });
}

}  // namespace

}  // namespace vrun::cpu

namespace vrun {

void register_cpu_reduce(CpuKernelTable& t) {
  for (OpKind op : {OpKind::reduce_sum, OpKind::reduce_mean, OpKind::reduce_max, OpKind::reduce_min})
    t.set(op, cpu::reduce_kernel);
  t.set(OpKind::argmax, cpu::argmax_kernel);
  t.set(OpKind::softmax, cpu::softmax_kernel);
  t.set(OpKind::log_softmax, cpu::softmax_kernel);
}

}  // namespace vrun
