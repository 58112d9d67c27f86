// conv1d / conv2d (cross-correlation, as torch). Depthwise-style groups (one in-channel per
// group) run a direct loop; everything else is im2col + sgemm per (batch, group). conv1d is
// conv2d with a height of 1.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/base/convert.h"
#include "runtime/base/cpu_features.h"
#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/gemm.h"
#include "kernels/ops/shapes/conv_params.h"

namespace vrun {

namespace {

struct Geometry {
  int64_t batch, cin, cout, groups, cin_g, cout_g;
  int64_t h, w, kh, kw, oh, ow;
  int64_t sh, sw, dh, dw, ph, pw;  // stride, dilation, leading padding
};

// A dense f32 copy of t unless it already is one. Strided views (a conformer's [B, T, C] rows
// seen as [B, C, T]) are gathered in tiles of 16 rows x 64 columns on the pool: each source
// cache line a tile touches is used 16 times before it leaves.
const float* dense_f32(const TensorView& t, ThreadPool* pool, std::vector<float>* scratch) {
  if (t.dtype == DType::f32 && t.is_contiguous()) return t.ptr<float>();
  if (t.numel() == 0 || t.rank() < 2) {
    *scratch = to_dense_f32(t);
    return scratch->data();
  }
  scratch->resize(static_cast<size_t>(t.numel()));
  const int r = t.rank();
  const int64_t n = t.shape[r - 1], st = t.strides[r - 1];
  const std::vector<int64_t> offs = row_offsets(t);
  const int64_t rows = static_cast<int64_t>(offs.size());
  constexpr int64_t kTileRows = 16, kTileCols = 64;
  const int64_t col_tiles = (n + kTileCols - 1) / kTileCols;
  float* out = scratch->data();
  pool->parallel_for((rows + kTileRows - 1) / kTileRows, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t rb = b0; rb < b1; ++rb)
      for (int64_t ct = 0; ct < col_tiles; ++ct) {
        const int64_t c0 = ct * kTileCols, cn = std::min(kTileCols, n - c0);
        for (int64_t row = rb * kTileRows; row < std::min(rows, (rb + 1) * kTileRows); ++row)
          load_row_f32(elem_ptr(t, offs[static_cast<size_t>(row)] + c0 * st), t.dtype, st, cn, out + row * n + c0);
      }
  });
  return out;
}

// One output channel of a group with a single in-channel: 2-D correlation over the padded plane.
VRUN_ALWAYS_INLINE void depthwise_plane_body(const Geometry& g, const float* x, const float* w, float* y) {
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    float* yr = y + oy * g.ow;
    std::fill(yr, yr + g.ow, 0.f);
    for (int64_t ky = 0; ky < g.kh; ++ky) {
      const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      const float* xr = x + iy * g.w;
      for (int64_t kx = 0; kx < g.kw; ++kx) {
        const float wv = w[ky * g.kw + kx];
        const int64_t off = kx * g.dw - g.pw;
        // Output columns whose input column lies inside the row.
        int64_t lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
        int64_t hi = (g.w - 1 - off) < 0 ? -1 : (g.w - 1 - off) / g.sw;
        hi = std::min(hi, g.ow - 1);
        if (g.sw == 1) {
          for (int64_t ox = lo; ox <= hi; ++ox) yr[ox] += wv * xr[ox + off];
        } else {
          for (int64_t ox = lo; ox <= hi; ++ox) yr[ox] += wv * xr[ox * g.sw + off];
        }
      }
    }
  }
}

// The same loops compiled for AVX2 + FMA (8 lanes and fused multiply-adds) where the CPU has them.
VRUN_AVX2 void depthwise_plane_avx2(const Geometry& g, const float* x, const float* w, float* y) {
  depthwise_plane_body(g, x, w, y);
}
void depthwise_plane_plain(const Geometry& g, const float* x, const float* w, float* y) {
  depthwise_plane_body(g, x, w, y);
}

// col[(c * kh + ky) * kw + kx][oy * ow + ox] = x[c][iy][ix] (0 outside), rows in parallel.
void im2col(const Geometry& g, const float* x, float* col, ThreadPool* pool) {
  const int64_t rows = g.cin_g * g.kh * g.kw, cols = g.oh * g.ow;
  pool->parallel_for(rows, 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t kx = r % g.kw, ky = (r / g.kw) % g.kh, c = r / (g.kw * g.kh);
      float* dst = col + r * cols;
      const float* xc = x + c * g.h * g.w;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        const int64_t iy = oy * g.sh - g.ph + ky * g.dh;
        float* d = dst + oy * g.ow;
        if (iy < 0 || iy >= g.h) {
          std::fill(d, d + g.ow, 0.f);
          continue;
        }
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t ix = ox * g.sw - g.pw + kx * g.dw;
          d[ox] = (ix >= 0 && ix < g.w) ? xc[iy * g.w + ix] : 0.f;
        }
      }
    }
  });
}

Status conv_kernel(const KernelCall& call) {
  const bool is1d = call.op == OpKind::conv1d;
  const TensorView& xv = call.input(0);
  const TensorView& wv = call.input(1);
  TensorView& yv = call.out[0];
  int64_t stride[2] = {1, 1}, dil[2] = {1, 1}, plo[2] = {0, 0}, phi[2] = {0, 0};
  const int nd = is1d ? 1 : 2;
  VRUN_RETURN_IF_ERROR(conv_spatial_params(op_name(call.op), call.attr(), nd, stride + 2 - nd, dil + 2 - nd,
                                           plo + 2 - nd, phi + 2 - nd));
  Geometry g{};
  g.batch = xv.shape[0];
  g.cin = xv.shape[1];
  g.cout = wv.shape[0];
  g.groups = call.attr().i("groups");
  g.cin_g = wv.shape[1];
  g.cout_g = g.cout / g.groups;
  g.h = is1d ? 1 : xv.shape[2];
  g.w = xv.shape[is1d ? 2 : 3];
  g.kh = is1d ? 1 : wv.shape[2];
  g.kw = wv.shape[is1d ? 2 : 3];
  g.oh = is1d ? 1 : yv.shape[2];
  g.ow = yv.shape[is1d ? 2 : 3];
  g.sh = stride[0], g.sw = stride[1], g.dh = dil[0], g.dw = dil[1], g.ph = plo[0], g.pw = plo[1];
  if (yv.numel() == 0) return Status::ok();

  std::vector<float> xs, ws, ys;
  const float* x = dense_f32(xv, call.pool, &xs);
  const float* w = dense_f32(wv, call.pool, &ws);
  float* y = yv.dtype == DType::f32 ? yv.ptr<float>() : (ys.resize(static_cast<size_t>(yv.numel())), ys.data());
  const int64_t plane = g.oh * g.ow, kvol = g.cin_g * g.kh * g.kw;

  // One in-channel per group and one output channel per group (depthwise) runs direct; one
  // in-channel feeding many output channels (a first layer over a spectrogram) is a product of
  // every output channel's taps with one im2col of the input, as the general case.
  if (g.cin_g == 1 && g.cout_g == 1) {
    const auto depthwise_plane = cpu_has_avx2() ? depthwise_plane_avx2 : depthwise_plane_plain;
    call.pool->parallel_for(g.batch * g.cout, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / g.cout, co = t % g.cout, ci = co / g.cout_g;
        depthwise_plane(g, x + (b * g.cin + ci) * g.h * g.w, w + co * g.kh * g.kw, y + t * plane);
      }
    });
  } else {
    const bool direct = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 &&
                        plo[1] == 0 && phi[0] == 0 && phi[1] == 0;
    std::vector<float> col(direct ? 0 : static_cast<size_t>(kvol * plane));
    for (int64_t b = 0; b < g.batch; ++b) {
      for (int64_t gi = 0; gi < g.groups; ++gi) {
        const float* xg = x + (b * g.cin + gi * g.cin_g) * g.h * g.w;
        const float* src = xg;
        if (!direct) {
          im2col(g, xg, col.data(), call.pool);
          src = col.data();
        }
        sgemm(g.cout_g, plane, kvol, w + gi * g.cout_g * kvol, kvol, src, plane, false,
              y + (b * g.cout + gi * g.cout_g) * plane, plane, false, call.pool);
      }
    }
  }
  if (call.has_input(2)) {
    const TensorView& bv = call.input(2);
    std::vector<float> bias(static_cast<size_t>(g.cout));
    load_row_f32(bv.data, bv.dtype, bv.strides[0], g.cout, bias.data());
    call.pool->parallel_for(g.batch * g.cout, std::max<int64_t>(1, 16384 / std::max<int64_t>(plane, 1)),
                            [&](int64_t t0, int64_t t1) {
                              for (int64_t t = t0; t < t1; ++t) {
                                float* yp = y + t * plane;
                                const float bc = bias[static_cast<size_t>(t % g.cout)];
                                for (int64_t i = 0; i < plane; ++i) yp[i] += bc;
                              }
                            });
  }
  if (yv.dtype != DType::f32) store_row_f32(y, yv.data, yv.dtype, yv.numel());
  return Status::ok();
}

// max_pool2d: each output the largest input its window covers (padding counts as -inf).
Status max_pool2d_kernel(const KernelCall& call) {
  const TensorView& xv = call.input(0);
  TensorView& yv = call.out[0];
  int64_t stride[2], dil[2], plo[2], phi[2];
  VRUN_RETURN_IF_ERROR(conv_spatial_params("max_pool2d", call.attr(), 2, stride, dil, plo, phi));
  const auto& k = call.attr().ints("kernel");
  const int64_t kh = k[0], kw = k[k.size() == 1 ? 0 : 1];
  const int64_t planes = xv.shape[0] * xv.shape[1], h = xv.shape[2], w = xv.shape[3];
  const int64_t oh = yv.shape[2], ow = yv.shape[3];
  if (yv.numel() == 0) return Status::ok();
  std::vector<float> xs, ys;
  const float* x = dense_f32(xv, call.pool, &xs);
  float* y = yv.dtype == DType::f32 ? yv.ptr<float>() : (ys.resize(static_cast<size_t>(yv.numel())), ys.data());
  call.pool->parallel_for(planes, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* xp = x + p * h * w;
      float* yp = y + p * oh * ow;
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          float m = -std::numeric_limits<float>::infinity();
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = oy * stride[0] - plo[0] + ky * dil[0];
            if (iy < 0 || iy >= h) continue;
            for (int64_t kx = 0; kx < kw; ++kx) {
              const int64_t ix = ox * stride[1] - plo[1] + kx * dil[1];
              if (ix < 0 || ix >= w) continue;
              const float v = xp[iy * w + ix];
              if (v > m || std::isnan(v)) m = v;
            }
          }
          yp[oy * ow + ox] = m;
        }
    }
  });
  if (yv.dtype != DType::f32) store_row_f32(y, yv.data, yv.dtype, yv.numel());
  return Status::ok();
}

}  // namespace

void register_cpu_conv(CpuKernelTable& t) {
  t.set(OpKind::conv1d, conv_kernel);
  t.set(OpKind::conv2d, conv_kernel);
  t.set(OpKind::max_pool2d, max_pool2d_kernel);
}

}  // namespace vrun
