#version 450
// Decode attention in one dispatch (flash-decoding): a workgroup owns up to R query rows that
// share one KV head (the G = Hq / Hkv heads of a grouped-query group times their Lq rows,
// G * Lq <= 8) and one chunk of that head's keys (grid z = B * nsplit chunks; one chunk holds all
// keys when the grid is large enough without splitting).
//   - The WG (256 or 512) invocations form NG = WG / LPK groups of LPK lanes (LPK <= the subgroup size); a
//     group takes one key at a time, each lane DPL = DMAX / LPK of its dims. Keys are dealt to
//     the groups U at a time (group g of step s takes keys s * NG * U + u * NG + g): the K and V
//     rows of all U keys are loaded up front (16-byte loads where rows are aligned), so U * 2
//     loads per lane are in flight at once.
//   - Scores: each lane's partial dot products meet through subgroupShuffleXor inside the group,
//     leaving every lane with the full scores; each group keeps its own running max, sum and
//     accumulator (online softmax, base-2 exponent: q is scaled by scale * log2(e)) in registers.
//   - The groups' partials merge through shared memory at the end, rescaled to the row's max.
//   - Split keys (SPLIT = 1): each workgroup writes its rows' unnormalised result, max and sum to
//     binding 5 and counts itself in on binding 6 (one counter per row block, KV head and batch
//     row); the last of the nsplit workgroups to arrive merges all of them into y and returns the
//     counter to zero. No second pass, so no second launch and barrier: a decode step's
//     attention is one kernel whatever the cache length, with enough workgroups to fill the GPU.
//   - DYN_LEN = 1 (2: one per batch entry): the first query's position is an i32 on the device (binding 7) and k/v hold a
//     cache's whole capacity: keys up to pos + Lq - 1 count, and the chunks are cut from that
//     length at run time (dyn_kchunk in common.glsl, as sdpa.comp does), so one recording serves
//     every position; chunks past the length hold no keys and count in as empty.
// Rows whose every key is masked output zeros, as the CPU kernel does.
// Bindings: 0 y, 1 q, 2 k, 3 v, 4 mask, 5 partials (f32), 6 counters (u32), 7 pos (i32). Push
// constants: sdpa.comp's layout, then the partials' and counters' and the position's offsets and
// the chunk count aimed at.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "common.glsl"
#include "sdpa_common.glsl"

// Invocations per workgroup (constant 12): 256, or 512 where the lanes' registers are few.
layout(local_size_x_id = 12) in;
layout(constant_id = 0) const uint DT_Q = 0;
layout(constant_id = 1) const uint DT_K = 0;
layout(constant_id = 2) const uint DT_V = 0;
layout(constant_id = 3) const uint DT_Y = 0;
layout(constant_id = 4) const uint DT_MASK = DT_NONE;
layout(constant_id = 5) const uint CAUSAL = 0;
// Row loads of K (V): 0 element by element (any dtype), 1 f16 rows 8 halves per 16-byte load,
// 2 f32 rows 4 floats per 16-byte load (rows and offsets aligned, D % 8 or D % 4 == 0).
layout(constant_id = 6) const uint KMODE = 0;
layout(constant_id = 7) const uint VMODE = 0;
// Head dims padded to DMAX (64 or 128).
layout(constant_id = 8) const uint DMAX = 64;
// Lanes per key: a power of two dividing the subgroup size, at most DMAX / 8.
layout(constant_id = 9) const uint LPK = 8;
// Query rows per workgroup (1, 2, 4 or 8).
layout(constant_id = 10) const uint R = 4;
// Keys per group per step.
layout(constant_id = 11) const uint U = 4;
layout(constant_id = 13) const uint SPLIT = 0;
layout(constant_id = 14) const uint DYN_LEN = 0;
BINDING(7)
layout(set = 0, binding = 2, std430) buffer BufK4 { uvec4 k4[]; };
// Written by one workgroup, read by another: coherent, so the reads bypass per-unit caches.
layout(set = 0, binding = 5, std430) coherent buffer BufPart { float part[]; };
layout(set = 0, binding = 6, std430) coherent buffer BufCnt { uint cnt[]; };
layout(set = 0, binding = 3, std430) buffer BufV4 { uvec4 v4[]; };

layout(push_constant) uniform Push {
  SDPA_PUSH_FIELDS
  uint off_part, off_cnt;
  uint off_len, want;
} pc;

const uint WG = gl_WorkGroupSize.x;
const uint NG = WG / LPK;     // key groups
const uint DPL = DMAX / LPK;  // dims per lane (a multiple of 8)
const uint NW = DPL / 4u;     // 16-byte words per lane and row in f32 mode (f16 mode uses half)
const float NEG_INF = -1.0 / 0.0;
const float LOG2E = 1.4426950408889634;
// The merge's staging block: 8 KiB of f32, SACC / DMAX groups' rows per pass.
const uint SACC = 2048;
const uint GPP = SACC / DMAX;
shared float sacc[SACC];
shared float sm_m[R * NG], sm_l[R * NG];
shared float row_m[R], row_l[R];
shared bool last_in;
// The last workgroup's merge: every chunk's max and sum (the host keeps nsplit <= MAX_SPLIT).
const uint MAX_SPLIT = 256;
shared float sp_m[MAX_SPLIT], sp_l[MAX_SPLIT];

// One lane's DPL dims of a row starting at element `at` (d0 = the lane's first dim): raw words
// first, converted when used, so that the loads of all U keys are issued before any is waited on.
void load_words(uint mode, uint which, uint at, uint d0, uint dim, out uvec4 w[NW]) {
  [[unroll]] for (uint c = 0; c < NW; ++c) w[c] = uvec4(0);
  if (mode == 1) {
    [[unroll]] for (uint c = 0; c < NW / 2u; ++c)
      if (d0 + 8u * c < dim) w[c] = which == 0 ? k4[(at + 8u * c) / 8u] : v4[(at + 8u * c) / 8u];
  } else if (mode == 2) {
    [[unroll]] for (uint c = 0; c < NW; ++c)
      if (d0 + 4u * c < dim) w[c] = which == 0 ? k4[(at + 4u * c) / 4u] : v4[(at + 4u * c) / 4u];
  }
}

void unpack_words(uint mode, uint dt, uint which, uint at, uint d0, uint dim, uvec4 w[NW], out float x[DPL]) {
  if (mode == 1) {
    [[unroll]] for (uint c = 0; c < DPL / 8u; ++c) {
      vec2 h0 = unpackHalf2x16(w[c].x), h1 = unpackHalf2x16(w[c].y);
      vec2 h2 = unpackHalf2x16(w[c].z), h3 = unpackHalf2x16(w[c].w);
      x[8u * c] = h0.x; x[8u * c + 1u] = h0.y; x[8u * c + 2u] = h1.x; x[8u * c + 3u] = h1.y;
      x[8u * c + 4u] = h2.x; x[8u * c + 5u] = h2.y; x[8u * c + 6u] = h3.x; x[8u * c + 7u] = h3.y;
    }
  } else if (mode == 2) {
    [[unroll]] for (uint c = 0; c < NW; ++c) {
      vec4 f = uintBitsToFloat(w[c]);
      x[4u * c] = f.x; x[4u * c + 1u] = f.y; x[4u * c + 2u] = f.z; x[4u * c + 3u] = f.w;
    }
  } else {
    [[unroll]] for (uint e = 0; e < DPL; ++e)
      x[e] = d0 + e < dim ? (which == 0 ? load2(dt, at + e) : load3(dt, at + e)) : 0.0;
  }
}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint hk = gl_WorkGroupID.y, b = gl_WorkGroupID.z / pc.nsplit, chunk = gl_WorkGroupID.z % pc.nsplit;
  uint Lk = pc.Lk, kchunk = pc.kchunk;
  if (DYN_LEN != 0) {  // 2: a position per batch entry
    Lk = dyn_len(b7_i32[pc.off_len + (DYN_LEN == 2 ? b : 0u)], pc.Lq, pc.Lk);
    kchunk = SPLIT == 1 ? dyn_kchunk(Lk, pc.want, pc.nsplit, pc.kchunk) : Lk;
  }
  uint kbeg = chunk * kchunk, kend = min(Lk, kbeg + kchunk);
  uint G = pc.Hq / pc.Hkv;
  uint rr0 = gl_WorkGroupID.x * R;
  uint nr = min(R, G * pc.Lq - rr0);
  uint g = t / LPK, lane = t % LPK;
  uint d0 = lane * DPL;
  uint ko = pc.off_k + b * pc.k_sb + hk * pc.k_sh + d0;
  uint vo = pc.off_v + b * pc.v_sb + hk * pc.v_sh + d0;

  // This lane's dims of the (scaled) query rows; rows past nr are zeros and never written.
  float q[R][DPL];
  uint head[R], qi[R];
  [[unroll]] for (uint r = 0; r < R; ++r) {
    uint rr = min(rr0 + r, G * pc.Lq - 1u);
    head[r] = hk * G + rr / pc.Lq;
    qi[r] = rr % pc.Lq;
    uint qo = pc.off_q + b * pc.q_sb + head[r] * pc.q_sh + qi[r] * pc.q_sl + d0;
    [[unroll]] for (uint e = 0; e < DPL; ++e)
      q[r][e] = r < nr && d0 + e < HEAD_D ? load1(DT_Q, qo + e) * (pc.scale * LOG2E) : 0.0;
  }

  float m[R], l[R], acc[R][DPL];
  [[unroll]] for (uint r = 0; r < R; ++r) {
    m[r] = NEG_INF;
    l[r] = 0.0;
    [[unroll]] for (uint e = 0; e < DPL; ++e) acc[r][e] = 0.0;
  }

  for (uint j0 = kbeg; j0 < kend; j0 += NG * U) {
    // Loads first (indices clamped to the last key, so the block has no branches), then math.
    uvec4 kw[U][NW], vw[U][NW];
    uint jk[U];
    [[unroll]] for (uint u = 0; u < U; ++u) {
      jk[u] = j0 + u * NG + g;
      uint jc = min(jk[u], kend - 1u);
      load_words(KMODE, 0, ko + jc * pc.k_sl, d0, HEAD_D, kw[u]);
      load_words(VMODE, 1, vo + jc * pc.v_sl, d0, HEAD_DV, vw[u]);
    }
    float s[U][R];
    [[unroll]] for (uint u = 0; u < U; ++u) {
      uint jc = min(jk[u], kend - 1u);
      float kx[DPL];
      unpack_words(KMODE, DT_K, 0, ko + jc * pc.k_sl, d0, HEAD_D, kw[u], kx);
      [[unroll]] for (uint r = 0; r < R; ++r) {
        float a = 0.0;
        [[unroll]] for (uint e = 0; e < DPL; ++e) a += q[r][e] * kx[e];
        [[unroll]] for (uint x = 1; x < LPK; x *= 2u) a += subgroupShuffleXor(a, x);
        bool live = jk[u] < kend;
        if (CAUSAL == 1) live = live && int(jk[u]) <= int(Lk) - int(pc.Lq) + int(qi[r]);
        if (live && DT_MASK != DT_NONE) {
          float mv = load4(DT_MASK, pc.off_m + b * pc.m_sb + head[r] * pc.m_sh + qi[r] * pc.m_sl + jk[u] * pc.m_sk);
          if (DT_MASK == DT_BOOL || DT_MASK == DT_U8) live = mv != 0.0;
          else a += mv * LOG2E;
        }
        s[u][r] = live ? a : NEG_INF;
      }
    }
    [[unroll]] for (uint r = 0; r < R; ++r) {
      float mn = m[r];
      [[unroll]] for (uint u = 0; u < U; ++u) mn = max(mn, s[u][r]);
      // Still no live key: nothing to add (and -inf - -inf must not reach exp2).
      float alpha = mn == NEG_INF ? 1.0 : exp2(m[r] - mn);
      m[r] = mn;
      l[r] *= alpha;
      [[unroll]] for (uint e = 0; e < DPL; ++e) acc[r][e] *= alpha;
      [[unroll]] for (uint u = 0; u < U; ++u) {
        float p = s[u][r] == NEG_INF ? 0.0 : exp2(s[u][r] - mn);
        s[u][r] = p;
        l[r] += p;
      }
    }
    [[unroll]] for (uint u = 0; u < U; ++u) {
      uint jc = min(jk[u], kend - 1u);
      float vx[DPL];
      unpack_words(VMODE, DT_V, 1, vo + jc * pc.v_sl, d0, HEAD_DV, vw[u], vx);
      [[unroll]] for (uint r = 0; r < R; ++r)
        [[unroll]] for (uint e = 0; e < DPL; ++e) acc[r][e] += s[u][r] * vx[e];
    }
  }

  // Merge the groups: the row max M over the groups' maxima, the sum L = sum_g l_g 2^(m_g - M),
  // then y = sum_g acc_g 2^(m_g - M) / L, staged GPP groups at a time.
  if (lane == 0)
    [[unroll]] for (uint r = 0; r < R; ++r) {
      sm_m[r * NG + g] = m[r];
      sm_l[r * NG + g] = l[r];
    }
  barrier();
  if (t < R) {
    float M = NEG_INF, L = 0.0;
    for (uint x = 0; x < NG; ++x) M = max(M, sm_m[t * NG + x]);
    for (uint x = 0; x < NG; ++x) {
      float mx = sm_m[t * NG + x];
      L += mx == NEG_INF ? 0.0 : sm_l[t * NG + x] * exp2(mx - M);
    }
    row_m[t] = M;
    row_l[t] = L;
  }
  barrier();
  [[unroll]] for (uint r = 0; r < R; ++r) {
    if (r >= nr) break;  // nr is the same for the whole workgroup: the barriers stay uniform
    float w = m[r] == NEG_INF ? 0.0 : exp2(m[r] - row_m[r]);
    float o = 0.0;
    for (uint g0 = 0; g0 < NG; g0 += GPP) {
      if (g >= g0 && g < g0 + GPP)
        [[unroll]] for (uint e = 0; e < DPL; ++e) sacc[(g - g0) * DMAX + d0 + e] = acc[r][e] * w;
      barrier();
      if (t < HEAD_DV)
        for (uint x = 0; x < min(GPP, NG - g0); ++x) o += sacc[x * DMAX + t];
      barrier();
    }
    if (t < HEAD_DV) {
      uint rr = rr0 + r;
      uint row = (b * pc.Hq + hk * G + rr / pc.Lq) * pc.Lq + rr % pc.Lq;
      if (SPLIT == 0) {
        store0(DT_Y, pc.off_y + row * HEAD_DV + t, row_l[r] > 0.0 ? o / row_l[r] : 0.0);
      } else {
        uint po = pc.off_part + (row * pc.nsplit + chunk) * (HEAD_DV + 2u);
        part[po + t] = o;
        if (t == 0u) {
          part[po + HEAD_DV] = row_m[r];
          part[po + HEAD_DV + 1u] = row_l[r];
        }
      }
    }
  }
  if (SPLIT == 0) return;

  // Count this workgroup in; the last of the row block's nsplit workgroups merges them all.
  memoryBarrierBuffer();
  barrier();
  uint ci = pc.off_cnt + (b * pc.Hkv + hk) * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (t == 0u) last_in = atomicAdd(cnt[ci], 1u) == pc.nsplit - 1u;
  barrier();
  if (!last_in) return;
  memoryBarrierBuffer();
  // The merge reads every chunk's partials at once (all loads in flight, one round trip), not
  // chunk after chunk: first the maxima and sums into shared memory, then each invocation takes
  // one dim of CPD chunk slots, CPD = WG / DMAX, summed through shared memory.
  const uint CPD = WG / DMAX;
  const uint UM = 8;  // chunk loads in flight per invocation
  uint used = (Lk + kchunk - 1u) / kchunk;  // chunks that hold keys (all nsplit unless DYN_LEN)
  uint dm = t % DMAX, cs = t / DMAX;
  for (uint r = 0; r < nr; ++r) {
    uint rr = rr0 + r;
    uint row = (b * pc.Hq + hk * G + rr / pc.Lq) * pc.Lq + rr % pc.Lq;
    uint p0 = pc.off_part + row * pc.nsplit * (HEAD_DV + 2u);
    barrier();  // the previous row's readers of the staging arrays are done
    for (uint c = t; c < used; c += WG) {
      sp_m[c] = part[p0 + c * (HEAD_DV + 2u) + HEAD_DV];
      sp_l[c] = part[p0 + c * (HEAD_DV + 2u) + HEAD_DV + 1u];
    }
    barrier();
    float M = NEG_INF;
    for (uint c = 0; c < used; ++c) M = max(M, sp_m[c]);
    float o = 0.0;
    if (M != NEG_INF && dm < HEAD_DV)
      for (uint c0 = cs; c0 < used; c0 += CPD * UM) {
        float pv[UM];
        [[unroll]] for (uint u = 0; u < UM; ++u) {
          uint c = c0 + u * CPD;
          pv[u] = c < used ? part[p0 + c * (HEAD_DV + 2u) + dm] : 0.0;
        }
        [[unroll]] for (uint u = 0; u < UM; ++u) {
          uint c = c0 + u * CPD;
          float mc = c < used ? sp_m[c] : NEG_INF;
          o += mc == NEG_INF ? 0.0 : pv[u] * exp2(mc - M);
        }
      }
    sacc[t] = o;
    barrier();
    if (cs == 0u && dm < HEAD_DV) {
      for (uint x = 1; x < CPD; ++x) o += sacc[x * DMAX + dm];
      float L = 0.0;
      if (M != NEG_INF)
        for (uint c = 0; c < used; ++c) L += sp_m[c] == NEG_INF ? 0.0 : sp_l[c] * exp2(sp_m[c] - M);
      store0(DT_Y, pc.off_y + row * HEAD_DV + dm, L > 0.0 ? o / L : 0.0);
    }
  }
  if (t == 0u) cnt[ci] = 0u;
}
