#version 450
// Attention for few query rows per head (decode) and the general fallback (any head dim up to
// 256, no subgroup operations). A workgroup takes up to RMAX query rows that share one KV head
// (the G = Hq / Hkv heads of a grouped-query group times their Lq rows) and one chunk of at most
// KCH keys, so each K/V row of the chunk is read from memory once for all of them:
//   1. K is staged in tiles of BKV rows through shared memory (coalesced, 8 halves per load for
//      aligned f16) and every (row, key) score goes to a shared score block;
//   2. row max and sum over the chunk (a shared tree per row);
//   3. V is streamed straight from memory, DMAX / 8 invocations per key row, 8 dims each (for f16
//      rows the first words are loaded up front, in flight during steps 1 and 2), and the
//      per-slot partial outputs are summed through shared memory at the end.
// Rows whose every key is masked output zeros, as the CPU kernel does.
// Split-K (flash-decoding): the host cuts the keys into chunks (grid z = B * nsplit). With
// SPLIT = 1 each workgroup writes its unnormalised partial (acc[Dv], max, sum) as f32 to binding
// 0 and sdpa_combine.comp (with MERGE = 1, the last workgroup) merges them; with SPLIT = 0 (one
// chunk) it writes y.
// Bindings: 0 y (or partials), 1 q, 2 k, 3 v, 4 mask, 5 pos (DYN_LEN = 1: an i32 on the device;
// DYN_LEN = 2: one per batch entry,
// the first query's position in a cache of Lk keys: keys up to pos + Lq - 1 count, and the chunks
// are cut from that length: dyn_kchunk in common.glsl;
// chunks past the length write empty partials), 6 workgroup counters and 7 y (MERGE = 1: the last
// workgroup of a row block's nsplit to finish merges their partials into y, as sdpa_combine.comp
// would, so a decode step's attention is one kernel; the host keeps nsplit <= KCH / 2).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "sdpa_common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT_Q = 0;
layout(constant_id = 1) const uint DT_K = 0;
layout(constant_id = 2) const uint DT_V = 0;
layout(constant_id = 3) const uint DT_Y = 0;
layout(constant_id = 4) const uint DT_MASK = DT_NONE;
layout(constant_id = 5) const uint CAUSAL = 0;
layout(constant_id = 6) const uint SPLIT = 0;
// 1: f16 K (V) with 16-byte aligned rows and D (Dv) % 8 == 0: rows are read 8 halves per load.
layout(constant_id = 7) const uint KVEC8 = 0;
layout(constant_id = 8) const uint VVEC8 = 0;
// Head dims padded to DMAX (64, 128 or 256); keys per chunk at most KCH (the host's kchunk).
layout(constant_id = 9) const uint DMAX = 128;
layout(constant_id = 10) const uint KCH = 256;
// Query rows per workgroup (2, 4 or 8): the host fits it to the rows that share a KV head.
layout(constant_id = 11) const uint RMAX = 8;
// Keys per K tile: 16 or 32 KiB of f32 (4096 / DMAX or 8192 / DMAX rows) as shared memory allows.
layout(constant_id = 12) const uint BKV = 32;
layout(constant_id = 13) const uint DYN_LEN = 0;
layout(constant_id = 14) const uint MERGE = 0;
// 1: local attention (push win_l / win_r): row i at position p = Lk - Lq + i sees keys
// p - win_l .. p + win_r, its mask in band coordinates (column j - (p - win_l)). The chunks are
// cut from the union of the block's rows' bands (the host sizes nsplit * kchunk to cover it).
layout(constant_id = 15) const uint WINDOW = 0;
// PRE > 0 (f16 K and V rows read 8 halves at a time, KVEC8 = VVEC8 = 1): each invocation loads
// its PRE words of the chunk's K and PRE of its V at the start, so the whole chunk is in flight
// at once (one memory round trip, not one per K tile and V step); the host keeps the chunk within
// PRE * 128 words (PRE a multiple of a K tile's words per invocation, BKV * DMAX / 8 / 128).
layout(constant_id = 16) const uint PRE = 0;
BINDING(5)
BINDING(7)
layout(set = 0, binding = 6, std430) coherent buffer BufCnt { uint cnt[]; };
layout(set = 0, binding = 2, std430) buffer BufK4 { uvec4 k4[]; };
layout(set = 0, binding = 3, std430) buffer BufV4 { uvec4 v4[]; };

layout(push_constant) uniform Push {
  SDPA_PUSH_FIELDS
  uint off_len, want;
  uint off_cnt, off_out;
} pc;

const uint WG = 128;
const uint DV4 = DMAX / 4u;
const uint LDK = DV4 + 1u;      // padded (vec4) row stride: lanes reading different keys hit different banks
const uint DQ = DMAX / 8u;      // invocations per V row in the P.V pass
const uint KS = WG / DQ;        // V rows in flight per workgroup
const uint TPRED = WG / RMAX;   // invocations per row in the max / sum reductions
const uint VPRE = PRE > 0u ? PRE : 8u;  // V words per invocation loaded before the scores (f16 rows)
const uint C8 = DMAX / 8u;      // 8-half words per K row
const uint TPU = BKV * C8 / WG; // K tile words per invocation (PRE > 0)
const float NEG_INF = -1.0 / 0.0;
shared vec4 Ks[BKV * LDK];
shared vec4 Qs[RMAX * DV4];
shared float S[RMAX * KCH];
shared float red[WG];
shared float row_m[RMAX], row_l[RMAX];
shared bool last_in;

void accumulate(inout float acc[RMAX][8], uint j, float v[8]) {
  [[unroll]] for (uint r = 0; r < RMAX; ++r) {
    float p = S[r * KCH + j];
    [[unroll]] for (uint e = 0; e < 8u; ++e) acc[r][e] += p * v[e];
  }
}

float[8] unpack8(uvec4 p) {
  vec2 h0 = unpackHalf2x16(p.x), h1 = unpackHalf2x16(p.y), h2 = unpackHalf2x16(p.z), h3 = unpackHalf2x16(p.w);
  return float[8](h0.x, h0.y, h1.x, h1.y, h2.x, h2.y, h3.x, h3.y);
}

// Scores of the block's rows against keys j0 .. j0 + n - 1 of the chunk (staged in Ks) into S.
void score_tile(uint j0, uint n, uint nr, uint rr0, uint hk, uint b, uint kbeg, uint Lk) {
  uint G = pc.Hq / pc.Hkv;
  for (uint pr = gl_LocalInvocationID.x; pr < RMAX * BKV; pr += WG) {
    uint r = pr / BKV, j = pr % BKV;
    if (j >= n) continue;
    float s = NEG_INF;
    if (r < nr) {
      uint rr = rr0 + r, h = hk * G + rr / pc.Lq, i = rr % pc.Lq;
      uint jj = kbeg + j0 + j;
      // Causal: query i sits at position Lk - Lq + i and sees keys up to it. Window: key jj is
      // in the band when its column (as uint) is below the band's width.
      uint col = WINDOW == 1 ? jj - (Lk - pc.Lq + i - pc.win_l) : jj;
      if ((CAUSAL == 0 || jj <= Lk - pc.Lq + i) && (WINDOW == 0 || col < pc.win_l + pc.win_r + 1u)) {
        float a = 0.0;
        for (uint c = 0; c < DV4; ++c) a += dot(Qs[r * DV4 + c], Ks[j * LDK + c]);
        s = a;
        if (DT_MASK != DT_NONE) {
          float mv = load4(DT_MASK, pc.off_m + b * pc.m_sb + h * pc.m_sh + i * pc.m_sl + col * pc.m_sk);
          if (DT_MASK == DT_BOOL || DT_MASK == DT_U8) s = mv != 0.0 ? s : NEG_INF;
          else s += mv;
        }
      }
    }
    S[r * KCH + j0 + j] = s;
  }
}

// An 8-half word of K into the K tile, as f32.
void stage_k(uint j, uint c, uvec4 p) {
  Ks[j * LDK + 2u * c] = vec4(unpackHalf2x16(p.x), unpackHalf2x16(p.y));
  Ks[j * LDK + 2u * c + 1u] = vec4(unpackHalf2x16(p.z), unpackHalf2x16(p.w));
}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint hk = gl_WorkGroupID.y;
  uint b = gl_WorkGroupID.z / pc.nsplit, split = gl_WorkGroupID.z % pc.nsplit;
  uint G = pc.Hq / pc.Hkv;
  uint rr0 = gl_WorkGroupID.x * RMAX;
  uint nr = min(RMAX, G * pc.Lq - rr0);
  uint ko = pc.off_k + b * pc.k_sb + hk * pc.k_sh;
  uint vo = pc.off_v + b * pc.v_sb + hk * pc.v_sh;

  for (uint e = t; e < RMAX * DV4; e += WG) {
    uint r = e / DV4, d = (e % DV4) * 4u;
    vec4 x = vec4(0.0);
    if (r < nr) {
      uint rr = rr0 + r, h = hk * G + rr / pc.Lq, i = rr % pc.Lq;
      uint qo = pc.off_q + b * pc.q_sb + h * pc.q_sh + i * pc.q_sl + d;
      for (uint u = 0; u < 4u; ++u)
        if (d + u < HEAD_D) x[u] = load1(DT_Q, qo + u) * pc.scale;
    }
    Qs[e] = x;
  }

  uint Lk = pc.Lk, kchunk = pc.kchunk;
  if (DYN_LEN != 0) {  // 2: a position per batch entry
    Lk = dyn_len(b5_i32[pc.off_len + (DYN_LEN == 2 ? b : 0u)], pc.Lq, pc.Lk);
    kchunk = SPLIT == 1 ? dyn_kchunk(Lk, pc.want, pc.nsplit, pc.kchunk) : Lk;
  }
  // The block's keys [kfirst, klast): all of them, or the union of its rows' bands. Rows of one
  // block are consecutive query rows of a head, or (a block across heads of a GQA group) may
  // take any row of the range.
  uint kfirst = 0u, klast = Lk;
  if (WINDOW == 1) {
    uint rl = rr0 + nr - 1u;
    int ia = int(rr0 % pc.Lq), ib = int(rl % pc.Lq);
    if (rr0 / pc.Lq != rl / pc.Lq) {
      ia = 0;
      ib = int(pc.Lq) - 1;
    }
    kfirst = band_begin(pc.Lq, Lk, pc.win_l, ia);
    klast = band_end(pc.Lq, Lk, pc.win_r, ib);
    if (CAUSAL == 1) klast = min(klast, uint(max(int(Lk) - int(pc.Lq) + ib + 1, 0)));
  }
  uint kbeg = kfirst + split * kchunk;
  uint kn = kbeg < klast ? min(kchunk, klast - kbeg) : 0u;  // keys in this chunk
  // P.V pass layout: invocation (slot ks, dims dq * 8 .. + 7). Its first VPRE V words are loaded
  // now, so their latency overlaps the K tiles and the scores.
  uint dq = t % DQ, ks = t / DQ;
  uint d0 = dq * 8u;
  uvec4 vpre[VPRE];
  uvec4 kpre[PRE > 0u ? PRE : 1u];
  if (VVEC8 == 1)
    [[unroll]] for (uint u = 0; u < VPRE; ++u) {
      uint j = ks + u * KS;
      vpre[u] = j < kn && d0 < HEAD_DV ? v4[(vo + (kbeg + j) * pc.v_sl + d0) / 8u] : uvec4(0);
    }
  // 1. scores
  if (PRE > 0u) {
    // The chunk's K words: word e = t + u * WG is key e / C8, dims (e % C8) * 8 .. + 7, so tile i
    // (keys i * BKV ..) is words i * TPU .. + TPU - 1 of every invocation.
    [[unroll]] for (uint u = 0; u < PRE; ++u) {
      uint e = t + u * WG, j = e / C8, c = e % C8;
      kpre[u] = j < kn && c * 8u < HEAD_D ? k4[(ko + (kbeg + j) * pc.k_sl + c * 8u) / 8u] : uvec4(0);
    }
    [[unroll]] for (uint i = 0; i < PRE / TPU; ++i) {
      if (i * BKV >= kn) break;
      barrier();  // the previous tile's readers are done (and Qs is written before the first)
      [[unroll]] for (uint u = 0; u < TPU; ++u) stage_k((t + u * WG) / C8, (t + u * WG) % C8, kpre[i * TPU + u]);
      barrier();
      score_tile(i * BKV, min(BKV, kn - i * BKV), nr, rr0, hk, b, kbeg, Lk);
    }
  }
  for (uint j0 = 0; PRE == 0u && j0 < kn; j0 += BKV) {
    uint n = min(BKV, kn - j0);
    barrier();  // the previous tile's readers are done (and Qs is written before the first)
    if (KVEC8 == 1) {
      for (uint e = t; e < BKV * C8; e += WG) {
        uint j = e / C8, c = e % C8;
        uvec4 p = uvec4(0);
        if (j < n && c * 8u < HEAD_D) p = k4[(ko + (kbeg + j0 + j) * pc.k_sl + c * 8u) / 8u];
        stage_k(j, c, p);
      }
    } else {
      for (uint e = t; e < BKV * DV4; e += WG) {
        uint j = e / DV4, d = (e % DV4) * 4u;
        vec4 x = vec4(0.0);
        if (j < n) {
          uint at = ko + (kbeg + j0 + j) * pc.k_sl + d;
          for (uint u = 0; u < 4u; ++u)
            if (d + u < HEAD_D) x[u] = load2(DT_K, at + u);
        }
        Ks[j * LDK + d / 4u] = x;
      }
    }
    barrier();
    score_tile(j0, n, nr, rr0, hk, b, kbeg, Lk);
  }
  barrier();

  // 2. max and sum per row over the chunk
  uint tr = t / TPRED, tl = t % TPRED;
  float mx = NEG_INF;
  for (uint j = tl; j < kn; j += TPRED) mx = max(mx, S[tr * KCH + j]);
  red[t] = mx;
  barrier();
  if (tl == 0) {
    for (uint u = 1; u < TPRED; ++u) mx = max(mx, red[t + u]);
    row_m[tr] = mx;
  }
  barrier();
  mx = row_m[tr];
  float sum = 0.0;
  for (uint j = tl; j < kn; j += TPRED) {
    float s = S[tr * KCH + j];
    // A row with every key of the chunk masked keeps max = -inf: its weights are all 0.
    float p = s == NEG_INF ? 0.0 : exp(s - mx);
    S[tr * KCH + j] = p;
    sum += p;
  }
  red[t] = sum;
  barrier();
  if (tl == 0) {
    for (uint u = 1; u < TPRED; ++u) sum += red[t + u];
    row_l[tr] = sum;
  }

  // 3. acc[r][d] = sum_j p[r][j] v[j][d]
  float acc[RMAX][8];
  [[unroll]] for (uint r = 0; r < RMAX; ++r)
    [[unroll]] for (uint e = 0; e < 8u; ++e) acc[r][e] = 0.0;
  if (VVEC8 == 1) {
    [[unroll]] for (uint u = 0; u < VPRE; ++u) {
      uint j = ks + u * KS;
      if (j < kn) accumulate(acc, j, unpack8(vpre[u]));
    }
    for (uint j = ks + VPRE * KS; j < kn; j += KS)
      accumulate(acc, j, unpack8(d0 < HEAD_DV ? v4[(vo + (kbeg + j) * pc.v_sl + d0) / 8u] : uvec4(0)));
  } else {
    for (uint j = ks; j < kn; j += KS) {
      float v[8];
      uint at = vo + (kbeg + j) * pc.v_sl + d0;
      for (uint e = 0; e < 8u; ++e) v[e] = d0 + e < HEAD_DV ? load3(DT_V, at + e) : 0.0;
      accumulate(acc, j, v);
    }
  }

  // Sum the KS slots' partials row by row through the (now free) K tile. acc is only ever
  // indexed by constants (the select below unrolls), so it stays in registers.
  for (uint r = 0; r < nr; ++r) {
    barrier();
    float a[8];
    [[unroll]] for (uint x = 0; x < RMAX; ++x)
      if (x == r) [[unroll]] for (uint e = 0; e < 8u; ++e) a[e] = acc[x][e];
    Ks[ks * (DMAX / 4u) + 2u * dq] = vec4(a[0], a[1], a[2], a[3]);
    Ks[ks * (DMAX / 4u) + 2u * dq + 1u] = vec4(a[4], a[5], a[6], a[7]);
    barrier();
    uint rr = rr0 + r, h = hk * G + rr / pc.Lq, i = rr % pc.Lq;
    uint row = (b * pc.Hq + h) * pc.Lq + i;
    for (uint d = t; d < HEAD_DV; d += WG) {
      float o = 0.0;
      for (uint u = 0; u < KS; ++u) o += Ks[u * (DMAX / 4u) + d / 4u][d % 4u];
      if (SPLIT == 1) b0_f32[pc.off_y + (row * pc.nsplit + split) * (HEAD_DV + 2u) + d] = o;
      else store0(DT_Y, pc.off_y + row * HEAD_DV + d, row_l[r] > 0.0 ? o / row_l[r] : 0.0);
    }
    if (SPLIT == 1 && t == 0) {
      uint po = pc.off_y + (row * pc.nsplit + split) * (HEAD_DV + 2u);
      b0_f32[po + HEAD_DV] = row_m[r];
      b0_f32[po + HEAD_DV + 1u] = row_l[r];
    }
  }
  if (MERGE == 0) return;

  // Count this workgroup in; the last of its row block's nsplit workgroups merges them all.
  memoryBarrierBuffer();
  barrier();
  uint ci = pc.off_cnt + (b * pc.Hkv + hk) * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (t == 0u) last_in = atomicAdd(cnt[ci], 1u) == pc.nsplit - 1u;
  barrier();
  if (!last_in) return;
  memoryBarrierBuffer();
  // Chunks that hold keys (all nsplit, or those cut from the length on the device). Their maxima
  // and sums go to shared memory (the score block is free), then each invocation merges one
  // (row, dim) with 8 partial loads in flight.
  uint used = WINDOW == 1 ? pc.nsplit : (Lk + kchunk - 1u) / kchunk;
  const uint HS = KCH / 2u;
  for (uint e = t; e < nr * used; e += WG) {
    uint r = e / used, c = e % used;
    uint rr = rr0 + r, row = (b * pc.Hq + hk * G + rr / pc.Lq) * pc.Lq + rr % pc.Lq;
    uint po = pc.off_y + (row * pc.nsplit + c) * (HEAD_DV + 2u);
    S[r * KCH + c] = b0_f32[po + HEAD_DV];
    S[r * KCH + HS + c] = b0_f32[po + HEAD_DV + 1u];
  }
  barrier();
  for (uint e = t; e < nr * HEAD_DV; e += WG) {
    uint r = e / HEAD_DV, d = e % HEAD_DV;
    uint rr = rr0 + r, row = (b * pc.Hq + hk * G + rr / pc.Lq) * pc.Lq + rr % pc.Lq;
    float M = NEG_INF;
    for (uint c = 0; c < used; ++c) M = max(M, S[r * KCH + c]);
    float o = 0.0, L = 0.0;
    uint p0 = pc.off_y + row * pc.nsplit * (HEAD_DV + 2u) + d;
    for (uint c0 = 0; c0 < used; c0 += 8u) {
      float pv[8];
      [[unroll]] for (uint u = 0; u < 8u; ++u) pv[u] = c0 + u < used ? b0_f32[p0 + (c0 + u) * (HEAD_DV + 2u)] : 0.0;
      [[unroll]] for (uint u = 0; u < 8u; ++u) {
        float mc = c0 + u < used ? S[r * KCH + c0 + u] : NEG_INF;
        // An empty chunk (all keys masked) has max -inf and contributes nothing.
        float w = mc == NEG_INF ? 0.0 : exp(mc - M);
        o += pv[u] * w;
        L += w == 0.0 ? 0.0 : S[r * KCH + HS + c0 + u] * w;
      }
    }
    // Every key masked: zeros, as the CPU kernel gives.
    store7(DT_Y, pc.off_out + row * HEAD_DV + d, L > 0.0 ? o / L : 0.0);
  }
  if (t == 0u) cnt[ci] = 0u;
}
