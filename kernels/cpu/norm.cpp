// Normalisation kernels. layer_norm and rms_norm work per row of the last dim (two-pass
// statistics in f32 lanes); batch_norm folds its parameters into one scale and shift per
// channel and streams each channel's slice.
#include <cmath>
#include <vector>

#include "runtime/base/convert.h"
#include "kernels/cpu/kernel_util.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/strided_iter.h"

namespace vrun::cpu {

namespace {

constexpr int kLanes = 16;

float lane_sum(const float* p, int64_t n) {
  float l[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) l[j] += p[i + j];
  for (; i < n; ++i) l[i % kLanes] += p[i];
  double s = 0;
  for (float v : l) s += v;
  return static_cast<float>(s);
}

float lane_sum_sq_dev(const float* p, int64_t n, float mean) {
  float l[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float d = p[i + j] - mean;
      l[j] += d * d;
    }
  for (; i < n; ++i) {
    const float d = p[i] - mean;
    l[i % kLanes] += d * d;
  }
  double s = 0;
  for (float v : l) s += v;
  return static_cast<float>(s);
}

// A parameter vector (any float dtype, any stride) as f32; `fill` when absent.
bool load_param(const KernelCall& c, int k, int64_t n, float fill, std::vector<float>* out) {
  out->assign(static_cast<size_t>(n), fill);
  if (!c.has_input(k)) return true;
  const TensorView& p = c.in[k];
  if (p.rank() != 1 || p.shape[0] != n) return false;
  return load_row_f32(p.dtype, p.data, p.strides[0], out->data(), n);
}

}  // namespace

void normalize_row(float* r, int64_t d, bool rms, float eps, const float* w, const float* b) {
  if (rms) {
    const float ms = lane_sum_sq_dev(r, d, 0.f) / static_cast<float>(d);
    const float inv = 1.f / std::sqrt(ms + eps);
    for (int64_t j = 0; j < d; ++j) r[j] = r[j] * inv * w[j];
    return;
  }
  const float mean = lane_sum(r, d) / static_cast<float>(d);
  const float var = lane_sum_sq_dev(r, d, mean) / static_cast<float>(d);
  const float inv = 1.f / std::sqrt(var + eps);
  if (b) {
    for (int64_t j = 0; j < d; ++j) r[j] = (r[j] - mean) * inv * w[j] + b[j];
  } else {
    for (int64_t j = 0; j < d; ++j) r[j] = (r[j] - mean) * inv * w[j];
  }
}

namespace {

template <typename T>
void row_norm(const KernelCall& c, bool rms, const std::vector<float>& w, const std::vector<float>& b, bool has_bias) {
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  const int last = x.rank() - 1;
  const int64_t d = x.shape[last], x_step = x.strides[last];
  Shape outer = x.shape;
  outer[last] = 1;
  const StridedIter<2> oit(outer, {contiguous_strides(y.shape), x.strides});
  const int64_t ys = oit.inner_stride(0), xs = oit.inner_stride(1);
  const float eps = static_cast<float>(c.attr().f("eps"));
  T* yp = static_cast<T*>(y.data);
  const T* xp = static_cast<const T*>(x.data);
  const float* wp = w.data();
  const float* bp = b.data();
  oit.parallel(
      c.pool,
      [&](const int64_t* off, int64_t cnt) {
        std::vector<float> buf(static_cast<size_t>(d));
        float* r = buf.data();
        for (int64_t i = 0; i < cnt; ++i) {
          load_row(xp + off[1] + i * xs, x_step, r, d);
          normalize_row(r, d, rms, eps, wp, has_bias ? bp : nullptr);
          store_row(r, yp + off[0] + i * ys, d);
        }
      },
      std::max<int64_t>(3 * d, 1));
}

Status row_norm_kernel(const KernelCall& c) {
  const bool rms = c.op == OpKind::rms_norm;
  VRUN_RETURN_IF_ERROR(check_arity(c, 1, rms ? 2 : 3, 1));
  const TensorView& x = c.in[0];
  if (x.rank() < 1 || c.out[0].dtype != x.dtype || c.out[0].shape != x.shape) return unsupported_dtypes(c);
  const int64_t d = x.shape[x.rank() - 1];
  if (d == 0 || x.numel() == 0) return Status::ok();
  std::vector<float> w, b;
  bool params_ok = load_param(c, 1, d, 1.f, &w);
  if (rms) {
    if (c.has_input(1)) {
      const float off = static_cast<float>(c.attr().f("unit_offset"));
      for (float& v : w) v += off;
    }
  } else {
    params_ok = params_ok && load_param(c, 2, d, 0.f, &b);
  }
  if (!params_ok) return unsupported_dtypes(c);
  return for_activation(c, x.dtype, [&](auto tag) {
    row_norm<typename decltype(tag)::type>(c, rms, w, b, !rms && c.has_input(2));
  });
}

template <typename T>
void channel_affine(const KernelCall& c, int ax, const std::vector<float>& scale, const std::vector<float>& shift) {
  const TensorView& x = c.in[0];
  const TensorView& y = c.out[0];
  // One channel's slice: x without the channel axis.
  Shape sub;
  Strides xs, ys;
  const Strides ydense = contiguous_strides(y.shape);
  for (int d = 0; d < x.rank(); ++d) {
    if (d == ax) continue;
    xs[sub.rank] = x.strides[d];
    ys[sub.rank] = ydense[d];
    sub.dims[sub.rank++] = x.shape[d];
  }
  const StridedIter<2> it(sub, {ys, xs});
  const int64_t xi = it.inner_stride(1), yi = it.inner_stride(0);
  const int64_t channels = x.shape[ax];
  parallel_range(c.pool, channels, std::max<int64_t>(sub.numel(), 1), [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      const float s = scale[ch], t = shift[ch];
      T* yp = static_cast<T*>(y.data) + ch * ydense[ax];
      const T* xp = static_cast<const T*>(x.data) + ch * x.strides[ax];
      it.for_range(0, it.numel(), [&](const int64_t* off, int64_t n) {
        T* yo = yp + off[0];
        const T* xo = xp + off[1];
        if (xi == 1 && yi == 1) {
          for (int64_t j = 0; j < n; ++j) yo[j] = from_float<T>(to_float(xo[j]) * s + t);
        } else {
          for (int64_t j = 0; j < n; ++j) yo[j * yi] = from_float<T>(to_float(xo[j * xi]) * s + t);
        }
      });
    }
  });
}

Status batch_norm_kernel(const KernelCall& c) {
  VRUN_RETURN_IF_ERROR(check_arity(c, 3, 5, 1));
  const TensorView& x = c.in[0];
  const int ax = normalize_axis(c.attr().i("axis"), x.rank());
  if (ax < 0) return err(ErrorCode::kInvalidArgument, "batch_norm: axis ", c.attr().i("axis"), " out of range for x ", x.shape.str());
  if (c.out[0].dtype != x.dtype || c.out[0].shape != x.shape) return unsupported_dtypes(c);
  const int64_t ch = x.shape[ax];
  std::vector<float> mean, var, w, b;
  if (!load_param(c, 1, ch, 0.f, &mean) || !load_param(c, 2, ch, 1.f, &var) || !load_param(c, 3, ch, 1.f, &w) ||
      !load_param(c, 4, ch, 0.f, &b))
    return unsupported_dtypes(c);
  const double eps = c.attr().f("eps");
  std::vector<float> scale(static_cast<size_t>(ch)), shift(static_cast<size_t>(ch));
  for (int64_t i = 0; i < ch; ++i) {
    const double s = w[i] / std::sqrt(static_cast<double>(var[i]) + eps);
    scale[i] = static_cast<float>(s);
    shift[i] = static_cast<float>(b[i] - mean[i] * s);
  }
  return for_activation(c, x.dtype, [&](auto tag) {
    channel_affine<typename decltype(tag)::type>(c, ax, scale, shift);
  });
}

}  // namespace

}  // namespace vrun::cpu

namespace vrun {

void register_cpu_norm(CpuKernelTable& t) {
  t.set(OpKind::layer_norm, cpu::row_norm_kernel);
  t.set(OpKind::rms_norm, cpu::row_norm_kernel);
  t.set(OpKind::batch_norm, cpu::batch_norm_kernel);
}

}  // namespace vrun
