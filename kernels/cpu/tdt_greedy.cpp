// tdt_greedy: NeMo's greedy TDT / RNN-T loop over one stream's encoder frames, or over several
// streams' (lanes) one after the other (ops.def has the layouts). Each matrix-vector product
// splits its rows over the pool's threads; everything runs in f32, as the per-op decode methods
// did before the loop became one op.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernel.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_util.h"

namespace vrun {

namespace {

float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }

// The prediction network and the joint over the op's packed weights (ops.def has the layout).
struct GreedyDecoder {
  explicit GreedyDecoder(const KernelCall& call)
      : L(call.attr().i("layers")),
        P(call.attr().i("pred_hidden")),
        J(call.attr().i("joint_hidden")),
        V(call.attr().i("vocab")),
        D(static_cast<int64_t>(call.attr().ints("durations").size())),
        O(V + D),
        w(call.input(3)),
        vec(call.input(4).ptr<float>()),
        pool(call.pool) {}

  // The prediction network fed `token`: LSTM layers then the projection, in place on the state.
  void predict(int64_t token, float* state) {
    float* h = state;
    float* c = state + L * P;
    float* g = state + 2 * L * P;
    xh_.resize(static_cast<size_t>(2 * P));
    gates_.resize(static_cast<size_t>(4 * P));
    std::copy_n(vec + token * P, P, xh_.begin());
    for (int64_t l = 0; l < L; ++l) {
      std::copy_n(h + l * P, P, xh_.begin() + P);
      const int64_t w0 = l * 8 * P * P;
      const float* b = vec + V * P + l * 4 * P;
      pool->parallel_for(4 * P, 32, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) gates_[r] = dot_f32_any(xh_.data(), weight(w0 + r * 2 * P), w.dtype, 2 * P) + b[r];
      });
      for (int64_t j = 0; j < P; ++j) {
        float& cc = c[l * P + j];
        cc = sigmoid(gates_[P + j]) * cc + sigmoid(gates_[j]) * std::tanh(gates_[2 * P + j]);
        h[l * P + j] = sigmoid(gates_[3 * P + j]) * std::tanh(cc);
      }
      std::copy_n(h + l * P, P, xh_.begin());
    }
    const int64_t wp = L * 8 * P * P;
    const float* bp = vec + V * P + L * 4 * P;
    pool->parallel_for(J, 32, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) g[r] = dot_f32_any(xh_.data(), weight(wp + r * P), w.dtype, P) + bp[r];
    });
  }

  // The joint of encoder projection `f` under the state's g: the token argmax and the duration
  // argmax (the first of equal maxima, as argmax does).
  void joint(const float* f, const float* state, int64_t* token, int64_t* duration) {
    const float* g = state + 2 * L * P;
    z_.resize(static_cast<size_t>(J));
    logits_.resize(static_cast<size_t>(O));
    for (int64_t i = 0; i < J; ++i) z_[i] = std::max(0.f, f[i] + g[i]);
    const int64_t wo = L * 8 * P * P + J * P;
    const float* bo = vec + V * P + L * 4 * P + J;
    pool->parallel_for(O, 32, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) logits_[r] = dot_f32_any(z_.data(), weight(wo + r * J), w.dtype, J) + bo[r];
    });
    *token = std::max_element(logits_.begin(), logits_.begin() + V) - logits_.begin();
    *duration = D > 0 ? std::max_element(logits_.begin() + V, logits_.end()) - (logits_.begin() + V) : 0;
  }

  const void* weight(int64_t e) const { return static_cast<const uint8_t*>(w.data) + e * dtype_elem_size(w.dtype); }

  const int64_t L, P, J, V, D, O;
  const TensorView& w;
  const float* vec;
  ThreadPool* pool;
  std::vector<float> xh_, gates_, z_, logits_;
};

// One lane's loop: control ctl [5], state in `state_in` (unused when fresh), its outputs in em
// [cap + 1, 4] and state [n_state].
Status greedy_lane(GreedyDecoder& dec, const Attrs& a, const float* frames, int64_t R, const int32_t* ctl, const float* state_in,
                   int32_t* em, float* state, int64_t n_state) {
  const std::vector<int64_t>& durations = a.ints("durations");
  const int64_t max_symbols = a.i("max_symbols"), cap = a.i("capacity"), blank = dec.V - 1;
  int64_t t = ctl[0], symbols = ctl[1];
  const int64_t end = ctl[2], row_offset = ctl[3];
  const bool fresh = ctl[4] != 0;
  if (t < end && (t + row_offset < 0 || end - 1 + row_offset >= R))
    return err(ErrorCode::kInvalidArgument, "tdt_greedy: frames ", t, " to ", end - 1, " are rows ", t + row_offset, " to ",
               end - 1 + row_offset, " of a frames tensor of ", R, " rows");
  if (symbols < 0 || symbols >= max_symbols)
    return err(ErrorCode::kInvalidArgument, "tdt_greedy: control says ", symbols, " symbols emitted at frame ", t, " (max_symbols ",
               max_symbols, ")");
  if (fresh) {
    std::fill_n(state, n_state, 0.f);
    dec.predict(blank, state);
  } else {
    std::memcpy(state, state_in, static_cast<size_t>(n_state) * sizeof(float));
  }
  std::fill_n(em, (cap + 1) * 4, 0);
  int64_t count = 0;
  while (t < end) {
    int64_t k = 0, di = 0;
    dec.joint(frames + (t + row_offset) * dec.J, state, &k, &di);
    const int64_t skip = dec.D > 0 ? durations[static_cast<size_t>(di)] : (k == blank ? 1 : 0);
    if (k != blank) {
      if (count == cap) break;  // call again: the same joint, the same state
      int32_t* row = em + (1 + count) * 4;
      row[0] = static_cast<int32_t>(k);
      row[1] = static_cast<int32_t>(t);
      row[2] = static_cast<int32_t>(skip);
      ++count;
      dec.predict(k, state);
    }
    ++symbols;
    t += skip;
    const bool again = skip == 0 && !(dec.D == 0 && k == blank);
    if (!again || symbols >= max_symbols) {
      if (symbols >= max_symbols) ++t;
      symbols = 0;
    }
  }
  em[0] = static_cast<int32_t>(count);
  em[1] = static_cast<int32_t>(t);
  em[2] = static_cast<int32_t>(symbols);
  return Status::ok();
}

Status tdt_greedy_kernel(const KernelCall& call) {
  VRUN_RETURN_IF_ERROR(cpu::check_arity(call, 5, 5, 2));
  GreedyDecoder dec(call);
  const TensorView& frames_in = call.input(0);
  std::vector<float> frames_store;
  const float* frames = frames_in.is_contiguous() ? frames_in.ptr<float>() : (frames_store = to_dense_f32(frames_in)).data();
  const TensorView& control = call.input(1);
  const int64_t lanes = control.shape.rank == 2 ? control.shape[0] : 1;
  const int64_t n_state = call.out[1].numel() / std::max<int64_t>(lanes, 1), em_rows = (call.attr().i("capacity") + 1) * 4;
  // Lane after lane, each as one stream alone (its products split over the pool as before).
  for (int64_t b = 0; b < lanes; ++b) {
    Status s = greedy_lane(dec, call.attr(), frames, frames_in.shape[0], control.ptr<int32_t>() + b * 5,
                           call.input(2).ptr<float>() + b * n_state, call.out[0].ptr<int32_t>() + b * em_rows,
                           call.out[1].ptr<float>() + b * n_state, n_state);
    if (!s.is_ok()) return lanes > 1 ? err(s.code(), "lane ", b, ": ", s.message()) : s;
  }
  return Status::ok();
}

}  // namespace

void register_cpu_tdt_greedy(CpuKernelTable& t) { t.set(OpKind::tdt_greedy, tdt_greedy_kernel); }

}  // namespace vrun
