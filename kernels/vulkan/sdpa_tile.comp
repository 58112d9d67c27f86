#version 450
// Flash attention for many query rows (prefill): a workgroup takes 16 query rows of one head
// and walks the keys in tiles of 16 staged in shared memory, so each K/V row is read from
// global memory once per 16 queries instead of once per query. Online softmax per row; head
// dims up to 128 (the host uses sdpa.comp otherwise). Same push constants and bindings as
// sdpa.comp (0 y, 1 q, 2 k, 3 v, 4 mask).
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint DT_Q = 0;
layout(constant_id = 1) const uint DT_K = 0;
layout(constant_id = 2) const uint DT_V = 0;
layout(constant_id = 3) const uint DT_Y = 0;
layout(constant_id = 4) const uint DT_MASK = DT_NONE;
layout(constant_id = 5) const uint CAUSAL = 0;

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

const uint WG = 64, BQ = 16, BKV = 16, MAXD = 128, LD = MAXD + 1;
const float NEG_INF = -1.0 / 0.0;
shared float Qs[BQ * LD];
shared float Ks[BKV * LD];
shared float Vs[BKV * MAXD];
shared float Ps[BQ * BKV];
shared float row_max[BQ], row_sum[BQ], row_corr[BQ];

void main() {
  uint t = gl_LocalInvocationID.x;
  uint i0 = gl_WorkGroupID.x * BQ, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  uint hk = h / (pc.Hq / pc.Hkv);
  uint qo = pc.off_q + b * pc.q_sb + h * pc.q_sh;
  uint ko = pc.off_k + b * pc.k_sb + hk * pc.k_sh;
  uint vo = pc.off_v + b * pc.v_sb + hk * pc.v_sh;
  uint mo = pc.off_m + b * pc.m_sb + h * pc.m_sh;
  uint nrows = min(BQ, pc.Lq - i0);
  for (uint e = t; e < BQ * pc.D; e += WG) {
    uint r = e / pc.D, d = e % pc.D;
    Qs[r * LD + d] = r < nrows ? load1(DT_Q, qo + (i0 + r) * pc.q_sl + d) * pc.scale : 0.0;
  }
  if (t < BQ) {
    row_max[t] = NEG_INF;
    row_sum[t] = 0.0;
  }
  // The last row of the block sees the most keys.
  uint kend = pc.Lk;
  if (CAUSAL == 1) kend = min(pc.Lk, pc.Lk - pc.Lq + i0 + nrows);
  float acc[BQ][2];
  for (uint r = 0; r < BQ; ++r) acc[r][0] = acc[r][1] = 0.0;
  barrier();

  for (uint j0 = 0; j0 < kend; j0 += BKV) {
    for (uint e = t; e < BKV * pc.D; e += WG) {
      uint j = e / pc.D, d = e % pc.D;
      Ks[j * LD + d] = j0 + j < kend ? load2(DT_K, ko + (j0 + j) * pc.k_sl + d) : 0.0;
    }
    for (uint e = t; e < BKV * pc.Dv; e += WG) {
      uint j = e / pc.Dv, d = e % pc.Dv;
      Vs[j * MAXD + d] = j0 + j < kend ? load3(DT_V, vo + (j0 + j) * pc.v_sl + d) : 0.0;
    }
    barrier();
    for (uint p = t; p < BQ * BKV; p += WG) {
      uint r = p / BKV, j = p % BKV, jj = j0 + j, i = i0 + r;
      float s = NEG_INF;
      bool visible = r < nrows && jj < kend && (CAUSAL == 0 || jj <= pc.Lk - pc.Lq + i);
      if (visible) {
        s = 0.0;
        for (uint d = 0; d < pc.D; ++d) s += Qs[r * LD + d] * Ks[j * LD + d];
        if (DT_MASK != DT_NONE) {
          float mv = load4(DT_MASK, mo + i * pc.m_sl + jj * pc.m_sk);
          if (DT_MASK == DT_BOOL || DT_MASK == DT_U8) s = mv != 0.0 ? s : NEG_INF;
          else s += mv;
        }
      }
      Ps[p] = s;
    }
    barrier();
    if (t < BQ) {
      float mt = NEG_INF;
      for (uint j = 0; j < BKV; ++j) mt = max(mt, Ps[t * BKV + j]);
      float old_m = row_max[t];
      float new_m = max(old_m, mt);
      float corr = new_m == NEG_INF ? 1.0 : exp(old_m - new_m);
      float sum = 0.0;
      for (uint j = 0; j < BKV; ++j) {
        float s = Ps[t * BKV + j];
        float pj = s == NEG_INF ? 0.0 : exp(s - new_m);
        Ps[t * BKV + j] = pj;
        sum += pj;
      }
      row_sum[t] = row_sum[t] * corr + sum;
      row_max[t] = new_m;
      row_corr[t] = corr;
    }
    barrier();
    for (uint c = 0; c < 2u; ++c) {
      uint d = t + c * WG;
      if (d >= pc.Dv) break;
      for (uint r = 0; r < BQ; ++r) {
        float a = acc[r][c] * row_corr[r];
        for (uint j = 0; j < BKV; ++j) a += Ps[r * BKV + j] * Vs[j * MAXD + d];
        acc[r][c] = a;
      }
    }
    barrier();
  }
  for (uint c = 0; c < 2u; ++c) {
    uint d = t + c * WG;
    if (d >= pc.Dv) break;
    for (uint r = 0; r < nrows; ++r) {
      uint yo = pc.off_y + ((b * pc.Hq + h) * pc.Lq + i0 + r) * pc.Dv;
      store0(DT_Y, yo + d, acc[r][c] / row_sum[r]);
    }
  }
}
