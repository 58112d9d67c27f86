// lstm: one layer, torch gate order (i, f, g, o). The input projection of every step is one
// GEMM up front; each step then adds h @ w_hh^T and applies the cell.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/gemm.h"

namespace vrun {

namespace {

float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

// The weights in place when they already are dense f32 (a decode step calls this once per token:
// copying two 4H x H matrices each time cost more than the step), else a dense f32 copy.
const float* dense_f32_weights(const TensorView& w, std::vector<float>* store) {
  if (w.dtype == DType::f32 && w.is_contiguous()) return w.ptr<float>();
  *store = to_dense_f32(w);
  return store->data();
}

Status lstm_kernel(const KernelCall& call) {
  const TensorView& xv = call.input(0);
  const int64_t nb = xv.shape[0], nt = xv.shape[1], ni = xv.shape[2];
  const int64_t nh = call.input(1).shape[1], g4 = 4 * nh;
  TensorView& yv = call.out[0];
  TensorView& hv = call.out[1];
  TensorView& cv = call.out[2];

  const std::vector<float> x = to_dense_f32(xv);
  std::vector<float> wih_store, whh_store;
  const float* wih = dense_f32_weights(call.input(3), &wih_store);
  const float* whh = dense_f32_weights(call.input(4), &whh_store);
  std::vector<float> h = to_dense_f32(call.input(1));
  std::vector<float> c = to_dense_f32(call.input(2));
  std::vector<float> bias(static_cast<size_t>(g4), 0.f);
  for (int k = 5; k <= 6; ++k) {
    if (!call.has_input(k)) continue;
    const std::vector<float> b = to_dense_f32(call.input(k));
    for (int64_t j = 0; j < g4; ++j) bias[j] += b[j];
  }

  // gx[(b * T + t) * 4H + j] = x[b, t] . w_ih[j] + biases
  std::vector<float> gx(static_cast<size_t>(nb * nt * g4));
  sgemm(nb * nt, g4, ni, x.data(), ni, wih, ni, true, gx.data(), g4, false, call.pool);
  for (int64_t r = 0; r < nb * nt; ++r)
    for (int64_t j = 0; j < g4; ++j) gx[r * g4 + j] += bias[j];

  std::vector<float> gates(static_cast<size_t>(nb * g4));
  std::vector<float> y(static_cast<size_t>(nb * nt * nh));
  for (int64_t t = 0; t < nt; ++t) {
    if (nb <= 4) {
      call.pool->parallel_for(g4, 64, [&](int64_t j0, int64_t j1) {
        for (int64_t b = 0; b < nb; ++b)
          for (int64_t j = j0; j < j1; ++j)
            gates[b * g4 + j] = dot_f32_any(h.data() + b * nh, whh + j * nh, DType::f32, nh);
      });
    } else {
      sgemm(nb, g4, nh, h.data(), nh, whh, nh, true, gates.data(), g4, false, call.pool);
    }
    for (int64_t b = 0; b < nb; ++b) {
      const float* gxb = gx.data() + (b * nt + t) * g4;
      const float* gb = gates.data() + b * g4;
      for (int64_t j = 0; j < nh; ++j) {
        const float ig = sigmoid(gb[j] + gxb[j]);
        const float fg = sigmoid(gb[nh + j] + gxb[nh + j]);
        const float gg = std::tanh(gb[2 * nh + j] + gxb[2 * nh + j]);
        const float og = sigmoid(gb[3 * nh + j] + gxb[3 * nh + j]);
        float& cc = c[b * nh + j];
        cc = fg * cc + ig * gg;
        h[b * nh + j] = og * std::tanh(cc);
        y[(b * nt + t) * nh + j] = h[b * nh + j];
      }
    }
  }
  store_row_f32(y.data(), yv.data, yv.dtype, nb * nt * nh);
  store_row_f32(h.data(), hv.data, hv.dtype, nb * nh);
  store_row_f32(c.data(), cv.data, cv.dtype, nb * nh);
  return Status::ok();
}

}  // namespace

void register_cpu_tdt_greedy(CpuKernelTable& t);  // tdt_greedy.cpp

void register_cpu_rnn(CpuKernelTable& t) {
  t.set(OpKind::lstm, lstm_kernel);
  register_cpu_tdt_greedy(t);
}

}  // namespace vrun
