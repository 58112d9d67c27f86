// linear: y[..., N] = x[..., K] @ W[N, K]^T + bias. Quantised weights take the integer path of
// quant_dot (activations quantised per block of 32, as llama.cpp does); float weights take
// AVX2 dot products for few rows and sgemm for many.
#include <algorithm>
#include <vector>

#include "runtime/base/cpu_features.h"
#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/quant_dot.h"
#include "runtime/base/vec_math.h"

namespace vrun {

Status bmm_kernel(const KernelCall& call);  // kernels/cpu/bmm.cpp

namespace {

// Rows at or below this count use the dot-product path: it streams W once and the matrix is
// read far more than it is reused, so GEMM blocking gains nothing.
constexpr int64_t kGemvRows = 4;
// Weight rows converted to f32 at a time before one sgemm (bounds the scratch for vocab-sized W).
constexpr int64_t kWeightTileRows = 1024;
// From this many rows on, quantised weights are dequantised for sgemm (measured crossover on
// AVX-512 VNNI: see bench/kernels/bench_linear.cpp).
constexpr int64_t kQuantGemmRows = 16;

// x rows as dense f32 (rows K apart); avoids a copy when x already is one.
const float* dense_x(const TensorView& x, int64_t m, int64_t k, std::vector<float>* scratch) {
  const int r = x.rank();
  bool dense = x.dtype == DType::f32 && x.strides[r - 1] == 1;
  int64_t expect = k;
  for (int d = r - 2; d >= 0 && dense; --d) {
    if (x.shape[d] != 1 && x.strides[d] != expect) dense = false;
    expect *= x.shape[d];
  }
  if (dense) return x.ptr<float>();
  scratch->resize(static_cast<size_t>(m * k));
  const auto offs = row_offsets(x);
  for (int64_t i = 0; i < m; ++i)
    load_row_f32(elem_ptr(x, offs[i]), x.dtype, x.strides[r - 1], k, scratch->data() + i * k);
  return scratch->data();
}

// Integer path: activations quantised per 32, one integer dot per block pair. Each thread
// streams a contiguous range of W rows in address order (see quant_dot_tile).
void linear_quant_int(const float* x, int64_t m, int64_t k, const TensorView& w, int64_t n, float* y,
                      ThreadPool* pool, const GemmBlockFn* epi) {
  const int64_t nb = k / kQuantBlock;
  const int64_t row_bytes = dtype_bytes(w.dtype, k);
  const auto* wp = static_cast<const uint8_t*>(w.data);
  std::vector<BlockQ8Act> xq(static_cast<size_t>(m * nb));
  for (int64_t i = 0; i < m; ++i) quantize_act_row(x + i * k, xq.data() + i * nb, k);
  // Beyond one pass's activation rows, W goes in strips that stay in L1 across the passes.
  const int64_t strip = m <= kQuantTileX ? n : 16;
  pool->parallel_for(n, 16, [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; j += strip) {
      const int nw = static_cast<int>(std::min(strip, j1 - j));
      quant_dot_tile(w.dtype, wp + j * row_bytes, row_bytes, nw, xq.data(), nb, static_cast<int>(m), nb, y + j, n);
    }
    if (epi) (*epi)(0, m, j0, j1);
  });
}

// Many rows: dequantising W to f32 once and running sgemm beats per-block integer dots (the
// per-block scale handling dominates those), and skips the activation rounding.
// The epilogue of a product over W's rows [j0, ...): its blocks' columns shifted by j0.
GemmBlockFn shifted(const GemmBlockFn* epi, int64_t j0) {
  if (!epi) return {};
  return [epi, j0](int64_t i0, int64_t i1, int64_t c0, int64_t c1) { (*epi)(i0, i1, j0 + c0, j0 + c1); };
}

void linear_quant_gemm(const float* x, int64_t m, int64_t k, const TensorView& w, int64_t n, float* y,
                       ThreadPool* pool, const GemmBlockFn* epi) {
  const int64_t row_bytes = dtype_bytes(w.dtype, k);
  std::vector<float> wt(static_cast<size_t>(std::min(n, kWeightTileRows) * k));
  for (int64_t j0 = 0; j0 < n; j0 += kWeightTileRows) {
    const int64_t rows = std::min(kWeightTileRows, n - j0);
    pool->parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        dequantize_row(w.dtype, static_cast<const uint8_t*>(w.data) + (j0 + r) * row_bytes, wt.data() + r * k, k);
    });
    const GemmBlockFn e = shifted(epi, j0);
    sgemm(m, rows, k, x, k, wt.data(), k, true, y + j0, n, false, pool, epi ? &e : nullptr);
  }
}

// one_row (linear's decode: a batched decode step's rows): the integer dot products of a one-row
// product at any row count, so that each row is what it is alone.
void linear_quant(const float* x, int64_t m, int64_t k, const TensorView& w, int64_t n, float* y, ThreadPool* pool,
                  const GemmBlockFn* epi, bool one_row) {
  if (m >= kQuantGemmRows && !one_row)
    linear_quant_gemm(x, m, k, w, n, y, pool, epi);
  else
    linear_quant_int(x, m, k, w, n, y, pool, epi);
}

// one_row (linear's decode): every row through the dot-product path at any row count, so that
// each row is what it is alone (GEMM sums in another order); each W row is read once for all
// rows (it stays in L1 across them).
void linear_float(const float* x, int64_t m, int64_t k, const TensorView& w, int64_t n, float* y, ThreadPool* pool,
                  const GemmBlockFn* epi, bool one_row) {
  const int64_t wes = dtype_elem_size(w.dtype);
  if (m <= kGemvRows || one_row) {
    pool->parallel_for(n, 64, [&](int64_t j0, int64_t j1) {
      for (int64_t j = j0; j < j1; ++j) {
        const void* wr = static_cast<const uint8_t*>(w.data) + j * k * wes;
        for (int64_t i = 0; i < m; ++i) y[i * n + j] = dot_f32_any(x + i * k, wr, w.dtype, k);
      }
      if (epi) (*epi)(0, m, j0, j1);
    });
    return;
  }
  if (w.dtype == DType::f32) {
    sgemm(m, n, k, x, k, w.ptr<float>(), k, true, y, n, false, pool, epi);
    return;
  }
  std::vector<float> wt(static_cast<size_t>(std::min(n, kWeightTileRows) * k));
  for (int64_t j0 = 0; j0 < n; j0 += kWeightTileRows) {
    const int64_t rows = std::min(kWeightTileRows, n - j0);
    pool->parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        load_row_f32(static_cast<const uint8_t*>(w.data) + (j0 + r) * k * wes, w.dtype, 1, k, wt.data() + r * k);
    });
    const GemmBlockFn e = shifted(epi, j0);
    sgemm(m, rows, k, x, k, wt.data(), k, true, y + j0, n, false, pool, epi ? &e : nullptr);
  }
}

enum class Act { none, gelu, silu };

// The epilogue over a block of y (rows ldy apart): bias, act and residual in the order separate
// ops would round, act(x W^T + bias) + residual. One loop per combination so each vectorises.
struct Epilogue {
  float* y;
  int64_t ldy;
  const float* bias;  // [N] or null
  const float* res;   // rows ldy apart, or null
};
template <bool kBias, Act kAct, bool kRes>
VRUN_ALWAYS_INLINE void epilogue_body(const Epilogue& e, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  for (int64_t i = i0; i < i1; ++i) {
    float* yr = e.y + i * e.ldy;
    const float* rr = kRes ? e.res + i * e.ldy : nullptr;
    for (int64_t j = j0; j < j1; ++j) {
      float v = yr[j];
      if constexpr (kBias) v += e.bias[j];
      if constexpr (kAct == Act::silu) v = v * cpu::sigmoid_fast(v);  // the silu op's formula
      if constexpr (kAct == Act::gelu) v = cpu::gelu_erf(v);          // the gelu op's (approximate none)
      if constexpr (kRes) v += rr[j];
      yr[j] = v;
    }
  }
}
template <bool kBias, Act kAct, bool kRes>
VRUN_AVX2 void epilogue_avx2(const Epilogue& e, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  epilogue_body<kBias, kAct, kRes>(e, i0, i1, j0, j1);
}
template <bool kBias, Act kAct, bool kRes>
void epilogue_plain(const Epilogue& e, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  epilogue_body<kBias, kAct, kRes>(e, i0, i1, j0, j1);
}
using EpilogueFn = void (*)(const Epilogue&, int64_t, int64_t, int64_t, int64_t);
template <bool kBias, Act kAct, bool kRes>
EpilogueFn epilogue_for() {
  return cpu_has_avx2() ? epilogue_avx2<kBias, kAct, kRes> : epilogue_plain<kBias, kAct, kRes>;
}
template <bool kBias, Act kAct>
EpilogueFn epilogue_for(bool res) {
  return res ? epilogue_for<kBias, kAct, true>() : epilogue_for<kBias, kAct, false>();
}
template <bool kBias>
EpilogueFn epilogue_for(Act act, bool res) {
  switch (act) {
    case Act::gelu: return epilogue_for<kBias, Act::gelu>(res);
    case Act::silu: return epilogue_for<kBias, Act::silu>(res);
    default: return epilogue_for<kBias, Act::none>(res);
  }
}
EpilogueFn epilogue_for(bool bias, Act act, bool res) {
  return bias ? epilogue_for<true>(act, res) : epilogue_for<false>(act, res);
}

Status linear_kernel(const KernelCall& call) {
  const TensorView& x = call.input(0);
  const TensorView& w = call.input(1);
  TensorView& y = call.out[0];
  const int64_t k = w.shape[1], n = w.shape[0];
  if (n == 0 || y.numel() == 0) return Status::ok();
  const int64_t m = y.numel() / n;
  if (!w.is_contiguous())
    return err(ErrorCode::kInvalidArgument, "linear: weight must be dense, got strides for ", w.shape.str());
  const bool glu = call.attr().s("glu") == "silu";
  std::vector<float> xs;
  const float* xf = nullptr;
  if (k > 0) {
    // x's rows (its trailing x_dims dims, 2K wide for glu) as dense f32: x's innermost dim
    // gathered in row-major order is exactly that.
    const int64_t last = x.shape[x.rank() - 1];
    xf = dense_x(x, x.numel() / last, last, &xs);
  }
  if (glu && k > 0) {
    // The gated row in f32, as the glu op computes it (first half times silu of the second),
    // without the rounding to x's dtype that op's output would take.
    std::vector<float> xg(static_cast<size_t>(m * k));
    call.pool->parallel_for(m, 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const float* a = xf + i * 2 * k;
        const float* b = a + k;
        float* o = xg.data() + i * k;
        for (int64_t j = 0; j < k; ++j) o[j] = a[j] * (b[j] * cpu::sigmoid_fast(b[j]));
      }
    });
    xs.swap(xg);
    xf = xs.data();
  }
  const std::string& norm = call.attr().s("norm");
  if (norm != "none") {
    // The norm prologue: x's rows normalised in an f32 copy, as the layer_norm / rms_norm op would.
    if (!call.has_input(4)) return err(ErrorCode::kInvalidArgument, "linear: norm = ", norm, " needs norm_weight");
    std::vector<float> g(static_cast<size_t>(k)), b(call.has_input(5) ? static_cast<size_t>(k) : 0);
    load_row_f32(call.input(4).data, call.input(4).dtype, call.input(4).strides[0], k, g.data());
    if (!b.empty()) load_row_f32(call.input(5).data, call.input(5).dtype, call.input(5).strides[0], k, b.data());
    if (xf != xs.data()) xs.assign(xf, xf + m * k);
    const bool rms = norm == "rms";
    const float eps = static_cast<float>(call.attr().f("eps"));
    call.pool->parallel_for(m, 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) cpu::normalize_row(xs.data() + i * k, k, rms, eps, g.data(), b.empty() ? nullptr : b.data());
    });
    xf = xs.data();
  }
  std::vector<float> ys;
  float* yf = y.dtype == DType::f32 ? y.ptr<float>() : (ys.resize(static_cast<size_t>(m * n)), ys.data());
  // Bias, act and residual applied to each block of y as the product finishes it (the residual
  // read in place when it is dense f32).
  const bool has_bias = call.has_input(2), has_res = call.has_input(3);
  const std::string& act_name = call.attr().s("act");
  const Act act = act_name == "gelu" ? Act::gelu : act_name == "silu" ? Act::silu : Act::none;
  std::vector<float> bias(has_bias ? static_cast<size_t>(n) : 0), rs;
  if (has_bias) load_row_f32(call.input(2).data, call.input(2).dtype, call.input(2).strides[0], n, bias.data());
  const Epilogue ep{yf, n, has_bias ? bias.data() : nullptr, has_res ? dense_x(call.input(3), m, n, &rs) : nullptr};
  const EpilogueFn ep_fn = epilogue_for(has_bias, act, has_res);
  const GemmBlockFn epi_block = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) { ep_fn(ep, i0, i1, j0, j1); };
  const GemmBlockFn* epi = has_bias || has_res || act != Act::none ? &epi_block : nullptr;
  if (k == 0) {
    std::fill(yf, yf + m * n, 0.f);
    if (epi) (*epi)(0, m, 0, n);
  } else if (is_quantized(w.dtype)) {
    linear_quant(xf, m, k, w, n, yf, call.pool, epi, call.attr().i("decode") != 0);
  } else {
    linear_float(xf, m, k, w, n, yf, call.pool, epi, call.attr().i("decode") != 0);
  }
  if (y.dtype != DType::f32) {
    for (int64_t i = 0; i < m; ++i)
      store_row_f32(yf + i * n, static_cast<uint8_t*>(y.data) + i * n * dtype_elem_size(y.dtype), y.dtype, n);
  }
  return Status::ok();
}

}  // namespace

void register_cpu_linalg(CpuKernelTable& t) {
  t.set(OpKind::linear, linear_kernel);
  t.set(OpKind::bmm, bmm_kernel);
}

}  // namespace vrun
