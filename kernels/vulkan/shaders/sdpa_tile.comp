#version 450
// Flash attention (FlashAttention-2 order) for many query rows: a workgroup owns BQ = 64 query
// rows of one head, four invocations per row, each holding a quarter of the head dims (Q and
// the output accumulator) of two rows in registers. K/V are walked in tiles of BKV keys staged in
// shared memory as f32; every invocation of a row reads the same key at the same time, so the
// tile reads are broadcasts, and each read feeds both rows. The four partial dot products meet through subgroup shuffles (the host checks
// the device has them), the online softmax is per invocation without any shared reduction, and
// tiles past the causal limit of the block's last row are never visited. Head dims up to DMAX
// (64 or 128). With a window the block walks only the keys of its rows' bands.
// Same push constants and bindings as sdpa.comp (0 y, 1 q, 2 k, 3 v, 4 mask).
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"
#include "sdpa_common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT_Q = 0;
layout(constant_id = 1) const uint DT_K = 0;
layout(constant_id = 2) const uint DT_V = 0;
layout(constant_id = 3) const uint DT_Y = 0;
layout(constant_id = 4) const uint DT_MASK = DT_NONE;
layout(constant_id = 5) const uint CAUSAL = 0;
layout(constant_id = 6) const uint DMAX = 128;
// 1: f16 K and V whose rows are 16-byte aligned with D, Dv % 8 == 0: tiles load 8 halves at a time.
layout(constant_id = 7) const uint KVVEC = 0;
// Keys per tile; the host picks it so 2 * BKV * DMAX floats fit the device's shared memory.
layout(constant_id = 8) const uint BKV = 32;
// 1: local attention (push win_l / win_r): row i at position p = Lk - Lq + i sees keys
// p - win_l .. p + win_r, and its mask is in band coordinates (column j - (p - win_l)).
layout(constant_id = 9) const uint WINDOW = 0;
layout(set = 0, binding = 2, std430) buffer BufK4 { uvec4 k4[]; };
layout(set = 0, binding = 3, std430) buffer BufV4 { uvec4 v4[]; };

layout(push_constant) uniform Push {
  SDPA_PUSH_FIELDS
} pc;

const uint WG = 128, TPR = 4, RPT = 2, BQ = RPT * WG / TPR, SB = 8;
const uint DV4 = DMAX / 4u;   // vec4 per staged row
const uint NV = DV4 / TPR;    // vec4 per invocation: dims 4 * (q + TPR * c) .. + 3
const float NEG_INF = -1.0 / 0.0;
shared vec4 Ks[BKV * DV4];
shared vec4 Vs[BKV * DV4];

// Stages rows j0 .. j0 + BKV of K (or V) as f32, zero past n valid rows and past dim `width`,
// so padded dims contribute 0 to dots and nothing garbage (inf/nan) meets a zero weight.
void stage(bool is_k, uint base, uint sl, uint j0, uint n, uint width) {
  uint t = gl_LocalInvocationID.x;
  if (KVVEC == 1) {
    const uint C8 = DMAX / 8u;
    for (uint e = t; e < BKV * C8; e += WG) {
      uint j = e / C8, c = e % C8;
      uvec4 p = uvec4(0);
      if (j < n && c * 8u < width) {
        uint at = (base + (j0 + j) * sl + c * 8u) / 8u;
        p = is_k ? k4[at] : v4[at];
      }
      vec4 lo = vec4(unpackHalf2x16(p.x), unpackHalf2x16(p.y));
      vec4 hi = vec4(unpackHalf2x16(p.z), unpackHalf2x16(p.w));
      if (is_k) {
        Ks[j * DV4 + 2u * c] = lo;
        Ks[j * DV4 + 2u * c + 1u] = hi;
      } else {
        Vs[j * DV4 + 2u * c] = lo;
        Vs[j * DV4 + 2u * c + 1u] = hi;
      }
    }
    return;
  }
  for (uint e = t; e < BKV * DV4; e += WG) {
    uint j = e / DV4, d = (e % DV4) * 4u;
    vec4 x = vec4(0.0);
    if (j < n) {
      uint at = base + (j0 + j) * sl + d;
      for (uint u = 0; u < 4u; ++u)
        if (d + u < width) x[u] = is_k ? load2(DT_K, at + u) : load3(DT_V, at + u);
    }
    if (is_k) Ks[e] = x;
    else Vs[e] = x;
  }
}

void main() {
  // Rows are assigned by subgroup lane, so the four invocations of a row are lanes 4k .. 4k + 3
  // of one subgroup whatever the device's mapping of local ids to lanes.
  uint lane = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  uint r = lane / TPR, q = lane % TPR;
  // Blocks of late rows see the most keys under a causal mask: start them first.
  uint blk = gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x;
  uint i0 = blk * BQ, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  uint hk = h / (pc.Hq / pc.Hkv);
  uint ko = pc.off_k + b * pc.k_sb + hk * pc.k_sh;
  uint vo = pc.off_v + b * pc.v_sb + hk * pc.v_sh;

  // Each invocation serves RPT rows, i0 + r + x * (BQ / RPT): every K/V vector read from shared
  // memory feeds RPT dot products.
  uint i[RPT], mo[RPT], klim[RPT], wlo[RPT];
  bool row_ok[RPT];
  vec4 qv[RPT][NV], o[RPT][NV];
  float m[RPT], l[RPT];
  [[unroll]] for (uint x = 0; x < RPT; ++x) {
    i[x] = i0 + r + x * (BQ / RPT);
    row_ok[x] = i[x] < pc.Lq;
    mo[x] = pc.off_m + b * pc.m_sb + h * pc.m_sh + i[x] * pc.m_sl;
    // Query i sits at position Lk - Lq + i (cache offset) and sees keys up to it.
    klim[x] = CAUSAL == 1 ? pc.Lk - pc.Lq + i[x] + 1u : pc.Lk;
    // The band's first key (as uint: key jj is in the band when jj - wlo < width, which is also
    // its mask column).
    wlo[x] = pc.Lk - pc.Lq + i[x] - pc.win_l;
    m[x] = NEG_INF;
    l[x] = 0.0;
    uint qo = pc.off_q + b * pc.q_sb + h * pc.q_sh + i[x] * pc.q_sl;
    [[unroll]] for (uint c = 0; c < NV; ++c) {
      uint d = 4u * (q + TPR * c);
      vec4 v = vec4(0.0);
      for (uint u = 0; u < 4u; ++u)
        if (row_ok[x] && d + u < HEAD_D) v[u] = load1(DT_Q, qo + d + u) * pc.scale;
      qv[x][c] = v;
      o[x][c] = vec4(0.0);
    }
  }

  uint last = min(pc.Lq, i0 + BQ) - 1u;
  uint kend = pc.Lk, kbeg = 0;
  if (CAUSAL == 1) kend = min(pc.Lk, pc.Lk - pc.Lq + last + 1u);
  const uint width = pc.win_l + pc.win_r + 1u;
  if (WINDOW == 1) {
    // The union of the block's bands: from its first row's first key to its last row's last.
    kbeg = band_begin(pc.Lq, pc.Lk, pc.win_l, int(i0));
    kend = min(kend, band_end(pc.Lq, pc.Lk, pc.win_r, int(last)));
  }

  for (uint j0 = kbeg; j0 < kend; j0 += BKV) {
    uint n = min(BKV, kend - j0);
    stage(true, ko, pc.k_sl, j0, n, HEAD_D);
    stage(false, vo, pc.v_sl, j0, n, HEAD_DV);
    barrier();
    // Sub-blocks of SB keys: the scores of one stay in registers (fully unrolled) while the
    // sub-block loop stays rolled, which keeps the code small (CPU implementations compile it
    // in a fraction of the time) at the price of one output rescale per SB keys.
    [[dont_unroll]] for (uint jb = 0; jb < n; jb += SB) {
      float s[RPT][SB];
      [[unroll]] for (uint u = 0; u < SB; ++u) {
        uint j = jb + u;
        float a[RPT];
        [[unroll]] for (uint x = 0; x < RPT; ++x) a[x] = 0.0;
        [[unroll]] for (uint c = 0; c < NV; ++c) {
          vec4 kv = Ks[j * DV4 + q + TPR * c];
          [[unroll]] for (uint x = 0; x < RPT; ++x) a[x] += dot(qv[x][c], kv);
        }
        [[unroll]] for (uint x = 0; x < RPT; ++x) {
          float t = a[x];
          t += subgroupShuffleXor(t, 1u);
          t += subgroupShuffleXor(t, 2u);
          uint jj = j0 + j;
          uint col = WINDOW == 1 ? jj - wlo[x] : jj;
          if (!row_ok[x] || j >= n || jj >= klim[x] || (WINDOW == 1 && col >= width)) t = NEG_INF;
          else if (DT_MASK != DT_NONE) {
            float mv = load4(DT_MASK, mo[x] + col * pc.m_sk);
            if (DT_MASK == DT_BOOL || DT_MASK == DT_U8) t = mv != 0.0 ? t : NEG_INF;
            else t += mv;
          }
          s[x][u] = t;
        }
      }
      [[unroll]] for (uint x = 0; x < RPT; ++x) {
        float mt = NEG_INF;
        [[unroll]] for (uint u = 0; u < SB; ++u) mt = max(mt, s[x][u]);
        float mn = max(m[x], mt);
        // A row with every key so far masked keeps m = -inf; exp(-inf - -inf) would be nan.
        float corr = mn == NEG_INF ? 1.0 : exp(m[x] - mn);
        float sum = 0.0;
        [[unroll]] for (uint u = 0; u < SB; ++u) {
          float p = s[x][u] == NEG_INF ? 0.0 : exp(s[x][u] - mn);
          s[x][u] = p;
          sum += p;
        }
        l[x] = l[x] * corr + sum;
        m[x] = mn;
        [[unroll]] for (uint c = 0; c < NV; ++c) o[x][c] *= corr;
      }
      [[unroll]] for (uint u = 0; u < SB; ++u)
        [[unroll]] for (uint c = 0; c < NV; ++c) {
          vec4 vv = Vs[(jb + u) * DV4 + q + TPR * c];
          [[unroll]] for (uint x = 0; x < RPT; ++x) o[x][c] += s[x][u] * vv;
        }
    }
    barrier();
  }
  [[unroll]] for (uint x = 0; x < RPT; ++x) {
    if (!row_ok[x]) continue;
    uint yo = pc.off_y + ((b * pc.Hq + h) * pc.Lq + i[x]) * HEAD_DV;
    // Rows whose every key is masked output zeros, as the CPU kernel does.
    float inv = l[x] > 0.0 ? 1.0 / l[x] : 0.0;
    [[unroll]] for (uint c = 0; c < NV; ++c) {
      uint d = 4u * (q + TPR * c);
      for (uint u = 0; u < 4u; ++u)
        if (d + u < HEAD_DV) store0(DT_Y, yo + d + u, o[x][c][u] * inv);
    }
  }
}
