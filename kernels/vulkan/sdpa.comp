#version 450
// Flash-style attention for one query row per workgroup: keys are visited in tiles of 64 with
// an online softmax (running max and sum), so the score matrix is never materialised and the KV
// cache is read in place through its strides. Grouped-query heads map head h to kv head
// h / (Hq / Hkv). Bindings: 0 y, 1 q, 2 k, 3 v, 4 mask.
// Split-K (flash-decoding): with SPLIT = 1 the keys are cut into chunks of kchunk, one per
// workgroup along z, and each writes its unnormalised partial (acc[Dv], max, sum) as f32 to
// binding 0; sdpa_combine.comp merges them. Decode has a single query row per head, so without
// splitting only Hq workgroups would stream the whole cache.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint DT_Q = 0;
layout(constant_id = 1) const uint DT_K = 0;
layout(constant_id = 2) const uint DT_V = 0;
layout(constant_id = 3) const uint DT_Y = 0;
layout(constant_id = 4) const uint DT_MASK = DT_NONE;
layout(constant_id = 5) const uint CAUSAL = 0;
layout(constant_id = 6) const uint SPLIT = 0;
// 1: f16 keys with 16-byte aligned rows (D % 8 == 0): each key row is read 8 halves per load.
// Every invocation reads its own key row, so scalar 2-byte loads would touch a cache line each.
layout(constant_id = 7) const uint KVEC8 = 0;
layout(set = 0, binding = 2, std430) buffer BufK4 { uvec4 k4[]; };

layout(push_constant) uniform Push {
  uint Lq, Lk, D, Dv, Hq, Hkv;
  float scale;
  uint q_sb, q_sh, q_sl;
  uint k_sb, k_sh, k_sl;
  uint v_sb, v_sh, v_sl;
  uint m_sb, m_sh, m_sl, m_sk;
  uint off_q, off_k, off_v, off_m, off_y;
  uint nsplit, kchunk;
} pc;

const uint WG = 64;
const uint MAXD = 256;
const uint DPT = MAXD / WG;  // output dims per invocation
shared float qs[MAXD];
shared float ps[WG];
shared float red[WG];

void main() {
  uint i = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z / pc.nsplit;
  uint split = gl_WorkGroupID.z % pc.nsplit;
  uint t = gl_LocalInvocationID.x;
  uint hk = h / (pc.Hq / pc.Hkv);
  uint qo = pc.off_q + b * pc.q_sb + h * pc.q_sh + i * pc.q_sl;
  uint ko = pc.off_k + b * pc.k_sb + hk * pc.k_sh;
  uint vo = pc.off_v + b * pc.v_sb + hk * pc.v_sh;
  uint mo = pc.off_m + b * pc.m_sb + h * pc.m_sh + i * pc.m_sl;
  for (uint d = t; d < pc.D; d += WG) qs[d] = load1(DT_Q, qo + d) * pc.scale;
  barrier();

  // Causal: query i sits at position Lk - Lq + i and sees keys up to it.
  uint kend = pc.Lk;
  if (CAUSAL == 1) kend = min(pc.Lk, pc.Lk - pc.Lq + i + 1u);

  float run_max = -1.0 / 0.0;
  float run_sum = 0.0;
  float acc[DPT];
  for (uint r = 0; r < DPT; ++r) acc[r] = 0.0;

  uint kbeg = split * pc.kchunk;
  kend = min(kend, kbeg + pc.kchunk);
  for (uint j0 = kbeg; j0 < kend; j0 += WG) {
    uint j = j0 + t;
    float s = -1.0 / 0.0;
    if (j < kend) {
      float dot_ = 0.0;
      uint kr = ko + j * pc.k_sl;
      if (KVEC8 == 1) {
        for (uint d8 = 0; d8 < pc.D / 8u; ++d8) {
          uvec4 p = k4[kr / 8u + d8];
          uint d = d8 * 8u;
          vec2 h0 = unpackHalf2x16(p.x), h1 = unpackHalf2x16(p.y), h2 = unpackHalf2x16(p.z), h3 = unpackHalf2x16(p.w);
          dot_ += qs[d] * h0.x + qs[d + 1u] * h0.y + qs[d + 2u] * h1.x + qs[d + 3u] * h1.y + qs[d + 4u] * h2.x +
                  qs[d + 5u] * h2.y + qs[d + 6u] * h3.x + qs[d + 7u] * h3.y;
        }
      } else {
        for (uint d = 0; d < pc.D; ++d) dot_ += qs[d] * load2(DT_K, kr + d);
      }
      s = dot_;
      if (DT_MASK != DT_NONE) {
        float mv = load4(DT_MASK, mo + j * pc.m_sk);
        if (DT_MASK == DT_BOOL || DT_MASK == DT_U8) s = mv != 0.0 ? s : -1.0 / 0.0;
        else s += mv;
      }
    }
    red[t] = s;
    barrier();
    for (uint st = WG / 2; st > 0; st >>= 1) {
      if (t < st) red[t] = max(red[t], red[t + st]);
      barrier();
    }
    float tile_max = red[0];
    barrier();
    float new_max = max(run_max, tile_max);
    // A row whose keys are all masked so far keeps max = -inf; exp(-inf - -inf) would be nan.
    float corr = new_max == -1.0 / 0.0 ? 1.0 : exp(run_max - new_max);
    float p = (s == -1.0 / 0.0) ? 0.0 : exp(s - new_max);
    ps[t] = p;
    red[t] = p;
    barrier();
    for (uint st = WG / 2; st > 0; st >>= 1) {
      if (t < st) red[t] += red[t + st];
      barrier();
    }
    run_sum = run_sum * corr + red[0];
    run_max = new_max;
    uint jn = min(WG, kend - j0);
    for (uint r = 0; r < DPT; ++r) {
      uint d = t + r * WG;
      if (d >= pc.Dv) break;
      float a = acc[r] * corr;
      for (uint jj = 0; jj < jn; ++jj) a += ps[jj] * load3(DT_V, vo + (j0 + jj) * pc.v_sl + d);
      acc[r] = a;
    }
    barrier();
  }
  if (SPLIT == 1) {
    uint po = pc.off_y + ((((b * pc.Hq + h) * pc.Lq + i) * pc.nsplit) + split) * (pc.Dv + 2u);
    for (uint r = 0; r < DPT; ++r) {
      uint d = t + r * WG;
      if (d >= pc.Dv) break;
      b0_f32[po + d] = acc[r];
    }
    if (t == 0) {
      b0_f32[po + pc.Dv] = run_max;
      b0_f32[po + pc.Dv + 1u] = run_sum;
    }
    return;
  }
  uint yo = pc.off_y + ((b * pc.Hq + h) * pc.Lq + i) * pc.Dv;
  for (uint r = 0; r < DPT; ++r) {
    uint d = t + r * WG;
    if (d >= pc.Dv) break;
    store0(DT_Y, yo + d, acc[r] / run_sum);
  }
}
