#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require
// decode_block (ops.def) in one dispatch: the rest of a decoder block at one position, after its
// Q, K and V projections and the cache write; with QKV = 1, decode_layer: the whole block, those
// included. A decode step is bound by its dependent dispatches (each pays a drain and a start on
// the GPU, ~4 us, against ~1 us of weights for a small q4_0 projection), so the stages here meet
// at grid barriers instead (an arrival counter, as tdt_greedy.comp's):
//   0  (QKV = 1) every workgroup stages x normalised (RMS, times attn_norm), then the QKV
//      projection's rows (scratch); after the barrier the grid writes the keys (rotated) and the
//      values at pos into the cache, and attention takes that position's key and value from the
//      scratch (as the cache holds them: rounded to its dtype), not from the cache;
//   A  attention: a work item is a query head and a split of the keys 0 .. pos (at most 2,048
//      keys); it rotates the query, scores its keys side by side (an invocation a key), takes
//      their softmax, sums the values (an invocation 8 dimensions of some keys) and writes its
//      partial result (weighted values, max, sum) to scratch;
//   B  every workgroup merges the partials of all heads into shared memory, then the output
//      projection's rows: x1 = x + a wo^T (scratch);
//   C  every workgroup stages x1 normalised (RMS, times ffn_norm), then the gate-up projection a
//      unit at a time (its up and gate rows together): h = up * silu(gate) (scratch);
//   D  every workgroup stages h, then the down projection's rows: y = x1 + h w_down^T.
// The host launches no more workgroups than the device keeps resident at once (one per
// multiprocessor); a barrier that waits too long gives up and the output becomes NaN instead of a
// hang. Rows go to subgroups RG at a time, spread over the whole grid; a lane requests its chunks
// of all RG rows before using any, and (streamed rows, decode_block_rows.glsl) the next step's before computing
// on the current one, a stage's first ones before the barrier ahead of it. Staged vectors sit in
// shared memory as f32, 16-byte slots permuted within each 32-element block (quantised blocks
// read by consecutive lanes then fall in different banks).
// Bindings: 0 y, 1 x, 2 q (f32; QKV = 1: w_qkv), 3 cache (DT_C; written when QKV = 1), 4 pos (i32),
// 5 inv_freq (f32), 6 wo, 7 ffn_norm, 8 w_gate_up, 9 w_down, 10 scratch (f32), 11 counters (u32,
// arrival and done, left at zero), 12 attn_norm (QKV = 1).
#include "common.glsl"

layout(local_size_x_id = 8) in;
layout(constant_id = 8) const uint WG = 256;
layout(constant_id = 0) const uint DT_WO = DT_F16;
layout(constant_id = 1) const uint DT_WGU = DT_F16;
layout(constant_id = 2) const uint DT_WD = DT_F16;
layout(constant_id = 3) const uint DT_C = DT_F16;
layout(constant_id = 4) const uint DT_G = DT_F32;
// rope mode: 1 half (pairs i, i + hd / 2), 0 interleaved (pairs 2i, 2i + 1).
layout(constant_id = 5) const uint HALF = 1;
// Floats of the largest staged vector (D, F, heads x hd, attention's query, scores and value
// partials), a multiple of 32.
layout(constant_id = 6) const uint MAXV = 8192;
// Float weights: 16-byte chunks a lane has in flight per row.
layout(constant_id = 7) const uint U = 4;

// The head dim (8 to 256, a multiple of 8).
layout(constant_id = 10) const uint HDC = 64;
// Timing only (VRUN_DECODE_SKIP): stages left out, bit 0 A, 1 B's rows, 2 C's rows, 3 D's rows,
// 4 stage 0's rows (the results are then wrong; the barriers and staging stay).
layout(constant_id = 9) const uint SKIP = 0;
// 1: decode_layer (stage 0 and the cache write); DT_WQ: w_qkv's dtype, DT_AN: attn_norm's.
layout(constant_id = 12) const uint QKV = 0;
layout(constant_id = 13) const uint DT_WQ = DT_F16;
layout(constant_id = 14) const uint DT_AN = DT_F32;

const uint RG = 2;
const uint MAX_SG = 64;   // subgroups a workgroup can have (WG 1024 in subgroups of 16)
const uint SPIN_LIMIT = 1u << 22;
const float NEG_BIG = -1e30;

layout(set = 0, binding = 5, std430) readonly buffer InvF { float invf[]; };
layout(set = 0, binding = 6, std430) readonly buffer WoU4 { uvec4 wo4[]; };
layout(set = 0, binding = 6, std430) readonly buffer WoU32 { uint wo32[]; };
layout(set = 0, binding = 6, std430) readonly buffer WoU16 { uint16_t wo16[]; };
BINDING(7)
layout(set = 0, binding = 8, std430) readonly buffer WguU4 { uvec4 wgu4[]; };
layout(set = 0, binding = 8, std430) readonly buffer WguU32 { uint wgu32[]; };
layout(set = 0, binding = 8, std430) readonly buffer WguU16 { uint16_t wgu16[]; };
layout(set = 0, binding = 9, std430) readonly buffer WdU4 { uvec4 wd4[]; };
layout(set = 0, binding = 9, std430) readonly buffer WdU32 { uint wd32[]; };
layout(set = 0, binding = 9, std430) readonly buffer WdU16 { uint16_t wd16[]; };
layout(set = 0, binding = 2, std430) readonly buffer WqU4 { uvec4 wq4[]; };
layout(set = 0, binding = 2, std430) readonly buffer WqU32 { uint wq32[]; };
layout(set = 0, binding = 2, std430) readonly buffer WqU16 { uint16_t wq16[]; };
BINDING(12)
layout(set = 0, binding = 10, std430) coherent buffer Scratch { float sc[]; };
layout(set = 0, binding = 11, std430) coherent buffer CountersU { uint cu[]; };
layout(set = 0, binding = 11, std430) coherent volatile buffer CountersV { uint cv[]; };

layout(push_constant) uniform Push {
  uint off_y, off_x, off_q, off_c, off_pos, off_inv;
  uint off_wo, off_g, off_wgu, off_wd, off_s, off_cnt;  // weights: elements, bytes when quantised
  uint off_an;
  uint H, KV, D, F, C, S;                               // S: key splits a head
  float eps;
  uint c_hs;  // cache elements between heads (C HD, or more for one slot of a batched cache)
} pc;

shared vec4 sh4[MAXV / 4u];
shared float s_red[MAX_SG];
shared bool s_fail;

uint G, wg, lid, sg, nsg, lane, SGS;
uint PART, X1, HB, QS;  // scratch regions (floats from off_s); QS: the QKV projection's rows

uint swz(uint s4) { return s4 ^ ((s4 >> 3) & 7u); }
float shf(uint i) { return sh4[swz(i >> 2)][i & 3u]; }
void set_shf(uint i, float v) { sh4[swz(i >> 2)][i & 3u] = v; }

// ---- grid barrier: the epoch-th waits for epoch * G arrivals (the counter only grows).
uint epoch = 0u;
void grid_sync() {
  memoryBarrierBuffer();
  barrier();
  if (G == 1u) return;
  ++epoch;
  if (lid == 0u) {
    const uint target = epoch * G;
    if (atomicAdd(cu[pc.off_cnt], 1u) + 1u != target) {
      uint spins = 0u;
      while (cv[pc.off_cnt] < target) {
        if (++spins > SPIN_LIMIT) {
          s_fail = true;
          break;
        }
      }
    }
    memoryBarrierBuffer();
  }
  barrier();
}

float wg_sum(float v) {
  const float s = subgroupAdd(v);
  if (subgroupElect()) s_red[sg] = s;
  barrier();
  float r = 0.0;
  for (uint p = 0; p < nsg; ++p) r += s_red[p];
  barrier();
  return r;
}

#include "decode_block_rows.glsl"

float cache_at(uint i) { return load3(DT_C, pc.off_c + i); }
const uint HD_HALF = HDC / 2u;

// ---- A: attention partials of (head, split) items. Keys go to invocations side by side (a key's
// whole dot product each, its row read in 16-byte loads), then the values by dimension, the
// invocations of a dimension splitting the keys: no chain of dependent loads per key.
layout(set = 0, binding = 3, std430) readonly buffer CacheU4 { uvec4 c4[]; };
// Whether the cache's rows take 16-byte loads (f16, rows and start 8 elements aligned).
bool cache_vec() { return DT_C == DT_F16 && (HDC & 7u) == 0u && (pc.off_c & 7u) == 0u; }
vec4 lo4(uvec4 w) { return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)); }
vec4 hi4(uvec4 w) { return vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)); }
// The staged query . the key row at `at`, its loads all issued before any is used.
float key_dot(uint at) {
  float s = 0.0;
  if (cache_vec()) {
    uvec4 w[HDC / 8u];
    [[unroll]] for (uint c = 0; c < HDC / 8u; ++c) w[c] = c4[(pc.off_c + at) / 8u + c];
    [[unroll]] for (uint c = 0; c < HDC / 8u; ++c) s += dot(lo4(w[c]), sh4[swz(2u * c)]) + dot(hi4(w[c]), sh4[swz(2u * c + 1u)]);
    return s;
  }
  [[unroll]] for (uint i = 0; i < HDC; ++i) s += shf(i) * cache_at(at + i);
  return s;
}

// Element i of the head at q (f32 [HD], in binding 2), rotated at pos.
float rotated_q(uint q, uint i, uint pos) {
  const uint half_ = HD_HALF;
  const bool first = HALF == 1u ? i < half_ : (i & 1u) == 0u;
  const uint partner = HALF == 1u ? (first ? i + half_ : i - half_) : (first ? i + 1u : i - 1u);
  const float ang = float(pos) * invf[pc.off_inv + (HALF == 1u ? (first ? i : i - half_) : i / 2u)];
  const vec2 cs = cos_sin(ang);
  return b2_f32[q + i] * cs.x + (first ? -1.0 : 1.0) * b2_f32[q + partner] * cs.y;
}

// v rounded to the nearest half (ties to even), in integer arithmetic: a compiler may drop a
// float -> half -> float conversion pair, and attention must use the value the cache stores.
float round_half(float v) {
  const uint u = floatBitsToUint(v), a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a >= 0x7f800000u) return v;
  if (a >= 0x38800000u) {  // a normal half: 10 of the 23 mantissa bits kept
    uint r = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;
    if (r >= 0x47800000u) r = 0x7f800000u;  // past the largest half (65504): infinity
    return uintBitsToFloat(sign | r);
  }
  // A subnormal half: a multiple of 2^-24 (the scalings by powers of two are exact).
  return uintBitsToFloat(sign | floatBitsToUint(roundEven(uintBitsToFloat(a) * 16777216.0) * (1.0 / 16777216.0)));
}

// A value as the cache holds it (rounded to its dtype).
float as_cached(float v) {
  if (DT_C == DT_F16) return round_half(v);
  if (DT_C == DT_BF16) {
    uint u = floatBitsToUint(v);
    u = isnan(v) ? (u | 0x400000u) : u + 0x7fffu + ((u >> 16) & 1u);
    return uintBitsToFloat(u & 0xffff0000u);
  }
  return v;
}

// Element i of the head at scratch float h, rotated at pos; `cached`: as the cache holds it.
float rotated(uint h, uint i, uint pos, bool cached) {
  const uint half_ = HD_HALF;
  const bool first = HALF == 1u ? i < half_ : (i & 1u) == 0u;
  const uint partner = HALF == 1u ? (first ? i + half_ : i - half_) : (first ? i + 1u : i - 1u);
  const float ang = float(pos) * invf[pc.off_inv + (HALF == 1u ? (first ? i : i - half_) : i / 2u)];
  // precise: the cache write and attention's copy of the key round the same sum (no contraction
  // into a fused multiply-add at one call and not the other).
  const vec2 cs = cos_sin(ang);
  precise const float r = sc[h + i] * cs.x + (first ? -1.0 : 1.0) * sc[h + partner] * cs.y;
  return cached ? as_cached(r) : r;
}

// The staged query . the key at pos, staged after it (rotated and rounded as the cache write
// stores it).
float current_key_dot() {
  float s = 0.0;
  [[unroll]] for (uint i = 0; i < HDC; ++i) s += shf(i) * shf(HDC + i);
  return s;
}

float wg_max(float v) {
  const float s = subgroupMax(v);
  if (subgroupElect()) s_red[sg] = s;
  barrier();
  float r = NEG_BIG;
  for (uint p = 0; p < nsg; ++p) r = max(r, s_red[p]);
  barrier();
  return r;
}

void attention(uint pos) {
  const uint HD = HDC, L = min(pos + 1u, pc.C), S = pc.S;
  const uint chunk = (L + S - 1u) / S;
  const float scale = inversesqrt(float(HD));
  const uint per_kv = pc.H / pc.KV;
  // Shared floats: the query [0, HD), with QKV = 1 the key at pos [HD, 2 HD), the chunk's scores
  // [SCO, SCO + chunk) (the host keeps the chunk within MAXV - 2 HD - 2 WG), the value partials
  // after them.
  const uint SCO = QKV == 1u ? 2u * HD : HD, VP = SCO + ((chunk + 3u) & ~3u);
  for (uint item = wg; item < pc.H * S; item += G) {
    const uint h = item / S, s = item % S;
    const uint k0 = min(s * chunk, L), k1 = min(k0 + chunk, L), n = k1 - k0;
    const uint kh = h / per_kv;
    const uint kb = kh * pc.c_hs, vb = (pc.KV + kh) * pc.c_hs;
    // With QKV = 1 the key and value at pos come from the scratch (the last of the last split's
    // keys): other workgroups write them into the cache in this dispatch.
    const bool cur = QKV == 1u && k1 == pos + 1u && n > 0u;
    const uint cv_ = pc.off_s + QS + (pc.H + pc.KV + kh) * HD;
    for (uint i = lid; i < HD; i += WG) {
      set_shf(i, QKV == 1u ? rotated(pc.off_s + QS + h * HD, i, pos, false) * scale : rotated_q(pc.off_q + h * HD, i, pos) * scale);
      if (cur) set_shf(HD + i, rotated(pc.off_s + QS + (pc.H + kh) * HD, i, pos, true));
    }
    barrier();
    float m = NEG_BIG;
    for (uint k = lid; k < n; k += WG) {
      const float v = cur && k == n - 1u ? current_key_dot() : key_dot(kb + (k0 + k) * HD);
      set_shf(SCO + k, v);
      m = max(m, v);
    }
    const float M = wg_max(m);
    float l = 0.0;
    for (uint k = lid; k < n; k += WG) {
      const float p = exp(shf(SCO + k) - M);
      set_shf(SCO + k, p);
      l += p;
    }
    const float lsum = wg_sum(l);  // its barriers order the p writes before the reads below
    // Values: invocation t takes 8 dimensions (16-byte loads) of keys t / (HD / 8), + WG / (HD / 8),
    // ...; the lanes of a subgroup holding the same dimensions add up with shuffles, then the
    // subgroups through shared memory.
    const uint dpl = 8u, per_key = HDC / dpl, groups = WG / per_key, dc = lid % per_key, gi = lid / per_key;
    float a[8];
    [[unroll]] for (uint j = 0; j < 8u; ++j) a[j] = 0.0;
    const uint nc = cur ? n - 1u : n;  // keys read from the cache
    if (cache_vec()) {
      for (uint k = gi; k < nc; k += groups) {
        const uvec4 w = c4[(pc.off_c + vb + (k0 + k) * HDC) / 8u + dc];
        const float p = shf(SCO + k);
        const vec4 l4 = lo4(w), h4 = hi4(w);
        a[0] += p * l4.x; a[1] += p * l4.y; a[2] += p * l4.z; a[3] += p * l4.w;
        a[4] += p * h4.x; a[5] += p * h4.y; a[6] += p * h4.z; a[7] += p * h4.w;
      }
    } else {
      for (uint k = gi; k < nc; k += groups) {
        const float p = shf(SCO + k);
        [[unroll]] for (uint j = 0; j < 8u; ++j) a[j] += p * cache_at(vb + (k0 + k) * HDC + dc * 8u + j);
      }
    }
    if (cur && gi == (n - 1u) % groups) {
      const float p = shf(SCO + n - 1u);
      [[unroll]] for (uint j = 0; j < 8u; ++j) a[j] += p * as_cached(sc[cv_ + dc * 8u + j]);
    }
    // Lanes per_key apart hold the same dimensions (per_key divides the subgroup size).
    for (uint m = per_key; m < SGS; m *= 2u)
      [[unroll]] for (uint j = 0; j < 8u; ++j) a[j] += subgroupShuffleXor(a[j], m);
    if (lane < per_key) [[unroll]] for (uint j = 0; j < 8u; ++j) set_shf(VP + sg * HDC + dc * 8u + j, a[j]);
    barrier();
    const uint po = pc.off_s + PART + item * (HD + 2u);
    for (uint i = lid; i < HD; i += WG) {
      float t = 0.0;
      for (uint g = 0; g < nsg; ++g) t += shf(VP + g * HD + i);
      sc[po + i] = t;
    }
    if (lid == 0u) {
      sc[po + HD] = n > 0u ? M : NEG_BIG;
      sc[po + HD + 1u] = lsum;
    }
    barrier();
  }
}

void main() {
  G = gl_NumWorkGroups.x;
  wg = gl_WorkGroupID.x;
  lid = gl_LocalInvocationID.x;
  sg = gl_SubgroupID;
  nsg = gl_NumSubgroups;
  lane = gl_SubgroupInvocationID;
  SGS = gl_SubgroupSize;
  const uint HD = HDC, H = pc.H, D = pc.D, F = pc.F;
  PART = 0u;
  X1 = H * pc.S * (HD + 2u);
  HB = X1 + D;
  QS = HB + F;
  if (lid == 0u) s_fail = false;
  barrier();
  const uint pos = uint(max(b4_i32[pc.off_pos], 0));

  if (QKV == 1u) {
    // 0: x normalised and staged; q, k, v = x w_qkv^T (scratch).
    const uint NQ = (H + 2u * pc.KV) * HD, QG = (NQ + 1u) / 2u;
    const bool sq = (SKIP & 16u) == 0u && streams(3u, pc.off_q, D);
    if (sq) stream_begin(3u, 3u, pc.off_q, D, QG, NQ);
    float ss = 0.0;
    for (uint i = lid; i < D; i += WG) {
      const float v = b1_f32[pc.off_x + i];
      set_shf(i, v);
      ss += v * v;
    }
    const float rs = inversesqrt(wg_sum(ss) / float(D) + pc.eps);
    for (uint i = lid; i < D; i += WG) set_shf(i, shf(i) * rs * load12(DT_AN, pc.off_an + i));
    barrier();
    if (sq) stream_run(3u, 3u, pc.off_q, D, QG, NQ);
    else if ((SKIP & 16u) == 0u) FOR_ROWS(NQ, 3u, pc.off_q, D, { sc[pc.off_s + QS + n] = acc[r]; })
    grid_sync();
    // The keys (rotated) and values at pos into the cache, over the whole grid; nothing in this
    // dispatch reads them from there.
    if (pos < pc.C) {
      for (uint t = wg * WG + lid; t < 2u * pc.KV * HD; t += G * WG) {
        const uint hh = t / HD, i = t % HD;
        const float v = hh < pc.KV ? rotated(pc.off_s + QS + (H + hh) * HD, i, pos, false) : sc[pc.off_s + QS + H * HD + t];
        store3(DT_C, pc.off_c + hh * pc.c_hs + pos * HD + i, as_cached(v));  // stored exactly
      }
    }
  }

  if ((SKIP & 1u) == 0u) attention(pos);
  const uint DG = (D + 1u) / 2u;
  const bool so = (SKIP & 2u) == 0u && streams(0u, pc.off_wo, H * HD);
  if (so) stream_begin(0u, 0u, pc.off_wo, H * HD, DG, D);
  grid_sync();

  // B: the heads' outputs merged from their splits, staged; x1 = x + a wo^T.
  for (uint i = lid; i < H * HD; i += WG) {
    const uint h = i / HD, d = i % HD;
    const uint p0 = pc.off_s + PART + h * pc.S * (HD + 2u);
    float M = NEG_BIG;
    for (uint s = 0; s < pc.S; ++s) M = max(M, sc[p0 + s * (HD + 2u) + HD]);
    float num = 0.0, den = 0.0;
    for (uint s = 0; s < pc.S; ++s) {
      const uint o = p0 + s * (HD + 2u);
      const float e = exp(sc[o + HD] - M);
      num += sc[o + d] * e;
      den += sc[o + HD + 1u] * e;
    }
    set_shf(i, num / den);
  }
  barrier();
  if (so) stream_run(0u, 0u, pc.off_wo, H * HD, DG, D);
  else if ((SKIP & 2u) == 0u) FOR_ROWS(D, 0u, pc.off_wo, H * HD, { sc[pc.off_s + X1 + n] = b1_f32[pc.off_x + n] + acc[r]; })
  const bool su = (SKIP & 4u) == 0u && streams(1u, pc.off_wgu, D);
  if (su) stream_begin(1u, 1u, pc.off_wgu, D, F, 2u * F);
  grid_sync();

  // C: x1 normalised and staged; h = up * silu(gate), a unit's two rows in one group.
  float q = 0.0;
  for (uint i = lid; i < D; i += WG) {
    const float v = sc[pc.off_s + X1 + i];
    set_shf(i, v);
    q += v * v;
  }
  const float rstd = inversesqrt(wg_sum(q) / float(D) + pc.eps);
  for (uint i = lid; i < D; i += WG) set_shf(i, shf(i) * rstd * load7(DT_G, pc.off_g + i));
  barrier();
  if (su) stream_run(1u, 1u, pc.off_wgu, D, F, 2u * F);
  for (uint u = wg * nsg + sg; u < F && (SKIP & 4u) == 0u && !su; u += G * nsg) {
    rr[0] = u;
    rr[1] = F + u;
    dot_rows(1u, pc.off_wgu, D);
    if (lane == 0u) sc[pc.off_s + HB + u] = acc[0] * silu(acc[1]);
  }
  const bool sd = (SKIP & 8u) == 0u && streams(2u, pc.off_wd, F);
  if (sd) stream_begin(2u, 2u, pc.off_wd, F, DG, D);
  grid_sync();

  // D: h staged; y = x1 + h w_down^T.
  for (uint i = lid; i < F; i += WG) set_shf(i, sc[pc.off_s + HB + i]);
  barrier();
  const bool failed = s_fail;
  if (sd) stream_run(2u, 2u, pc.off_wd, F, DG, D);
  else if ((SKIP & 8u) == 0u) FOR_ROWS(D, 2u, pc.off_wd, F, { b0_f32[pc.off_y + n] = failed ? uintBitsToFloat(0x7fc00000u) : sc[pc.off_s + X1 + n] + acc[r]; })

  // The last workgroup out leaves the counters at zero for the next user.
  if (G > 1u) {
    barrier();
    if (lid == 0u && atomicAdd(cu[pc.off_cnt + 1u], 1u) == G - 1u) {
      atomicExchange(cu[pc.off_cnt], 0u);
      atomicExchange(cu[pc.off_cnt + 1u], 0u);
    }
  }
}
