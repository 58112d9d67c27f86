#version 450
// Merges the split-K partials of sdpa.comp: y = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M)
// with M the largest partial max. Bindings: 0 y, 1 partials (f32, [rows, nsplit, Dv + 2]),
// 2 pos (DYN_LEN = 1: only the chunks sdpa.comp cut from the length on the device are read;
// 2: one position per batch entry of batch_rows rows).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_Y = 0;
layout(constant_id = 1) const uint DYN_LEN = 0;

layout(push_constant) uniform Push {
  uint n, Dv, nsplit;
  uint off_y, off_p;
  uint Lk, Lq, kchunk, want, off_len;
  uint batch_rows;  // DYN_LEN = 2 (a position per batch entry): rows of one entry
} pc;

void main() {
  uint idx = flat_invocation();
  if (idx >= pc.n) return;
  uint row = idx / pc.Dv, d = idx % pc.Dv;
  uint base = pc.off_p + row * pc.nsplit * (pc.Dv + 2u);
  uint used = pc.nsplit;
  if (DYN_LEN != 0) {
    uint L = dyn_len(b2_i32[pc.off_len + (DYN_LEN == 2 ? row / pc.batch_rows : 0u)], pc.Lq, pc.Lk);
    uint kc = dyn_kchunk(L, pc.want, pc.nsplit, pc.kchunk);
    used = (L + kc - 1u) / kc;
  }
  float M = -1.0 / 0.0;
  for (uint s = 0; s < used; ++s) M = max(M, b1_f32[base + s * (pc.Dv + 2u) + pc.Dv]);
  float num = 0.0, den = 0.0;
  for (uint s = 0; s < used; ++s) {
    uint p = base + s * (pc.Dv + 2u);
    float m = b1_f32[p + pc.Dv];
    // An empty chunk (all keys causal-masked) has max -inf and contributes nothing.
    float w = m == -1.0 / 0.0 ? 0.0 : exp(m - M);
    num += b1_f32[p + d] * w;
    den += b1_f32[p + pc.Dv + 1u] * w;
  }
  // Every key masked: zeros, as the CPU kernel gives.
  store0(DT_Y, pc.off_y + idx, den > 0.0 ? num / den : 0.0);
}
