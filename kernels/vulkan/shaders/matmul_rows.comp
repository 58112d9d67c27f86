#version 450
#extension GL_EXT_control_flow_attributes : require
// linear over the rows of a batched decode step (linear's decode attribute, more rows than the
// matvec kernels take): y = act(x W^T + bias) + residual in f32 arithmetic throughout. x is read
// as stored and W expanded to f32 as its tiles load (a q4_0 or q8_0 weight, d times a small
// integer, is exact in f32), so every row gets the products a one-row kernel computes, only
// added up in another order; no operand is rounded to halves for the tensor cores.
//
// W is read once for up to BM rows of x (the matvec kernels read it once per 8 rows, and re-read
// x for every pair of W rows): a workgroup owns BM x BN outputs, walks its K range one 32-element
// block at a time through shared memory (the next block's loads issued before the current one is
// used), and each invocation keeps TM x TN of them in registers, reading x and W from shared
// memory four elements at a time. Projections too narrow to fill the device split K over SPLIT
// workgroups whose partial sums the last of them adds up in the order of their K ranges (as
// matmul_cm2_common.glsl does), so the result does not depend on which finished last.
// Bindings: 0 y, 1 x, 2 W, 3 bias, 4 residual, 5 partial sums, 6 counters (split K).
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT_X = DT_F32;
layout(constant_id = 1) const uint DT_W = DT_Q4_0;
layout(constant_id = 2) const uint DT_Y = DT_F32;
layout(constant_id = 3) const uint DT_BIAS = DT_NONE;
layout(constant_id = 4) const uint DT_RES = DT_NONE;
layout(constant_id = 5) const uint ACT = 0;
layout(constant_id = 6) const uint SPLIT = 1;
// Rows of x an invocation computes (4 or 2): tiles of 32 or 16 rows (steps of 16 rows or fewer
// do not pay for 32).
layout(constant_id = 7) const uint TM = 4;
// 1: float W whose rows start 16 bytes aligned (binding offset): a step's 16 elements of a row
// in 16-byte loads (two of halves, four of floats) rather than one load an element; the same
// values either way.
layout(constant_id = 8) const uint WVEC = 0;
// 1: f32 x whose rows start 16 bytes aligned: an invocation's XE elements of a row in 16-byte loads.
layout(constant_id = 9) const uint XVEC = 0;
// Columns of W an invocation computes (4 or 8): tiles of 64 or 128 columns. With 8, an invocation
// loads and computes two columns of the 64-column layout, 64 apart; each output's sum runs over k
// in the same order either way.
layout(constant_id = 10) const uint TN = 4;

layout(set = 0, binding = 5, std430) coherent buffer BufPart { float part[]; };
layout(set = 0, binding = 6, std430) coherent buffer BufCnt { uint cnt[]; };

layout(push_constant) uniform Push {
  uint M, N, K;
  uint x_sm, y_sm, res_sm;                 // row strides (elements)
  uint off_y, off_x, off_w, off_b, off_r;  // first elements; off_w in bytes for block-quantised W
  uint off_part, off_cnt;
} pc;

// 128 invocations as 8 x 16 groups of TM x 4 outputs: 8 TM rows of x by 64 rows of W.
const uint BM = 8u * TM, BN = 16u * TN, BK = 32u, NC = TN / 4u;
// Elements of x an invocation loads a step, and invocations a row of the tile takes.
const uint XE = BM / 4u, TPR = BK / XE;
// Shared tiles K-major, a row of vec4s padded by one so that the transposing stores spread
// over the banks.
const uint XR = BM / 4u + 1u, WR = BN / 4u + 1u;
shared vec4 xs[BK * XR];
shared vec4 ws[BK * WR];
layout(set = 0, binding = 2, std430) readonly buffer WU4 { uvec4 wu4[]; };
layout(set = 0, binding = 1, std430) readonly buffer XF4 { vec4 xf4[]; };

// One block step's loads, held in registers until the tiles are free: XE elements of x (row
// t / TPR, elements XE (t % TPR) ..) and 16 of W for each of the NC rows t / 2 + 64 c (half t % 2
// of the block).
float xr[XE];
float wr[NC][16];

uint block_bytes() { return DT_W == DT_Q8_0 ? 34u : DT_W == DT_Q4_0 ? 18u : 20u; }

void load_step(const uint m0, const uint n0, const uint k0) {
  const uint t = gl_LocalInvocationID.x;
  const uint xm = m0 + t / TPR, xk = k0 + XE * (t % TPR);
  if (XVEC == 1u) {
    [[unroll]] for (uint v = 0; v < XE / 4u; ++v) {
      const vec4 q = xm < pc.M ? xf4[(pc.off_x + xm * pc.x_sm + xk) / 4u + v] : vec4(0.0);
      [[unroll]] for (uint j = 0; j < 4u; ++j) xr[4u * v + j] = q[j];
    }
  } else {
    [[unroll]] for (uint e = 0; e < XE; ++e) xr[e] = xm < pc.M ? load1(DT_X, pc.off_x + xm * pc.x_sm + xk + e) : 0.0;
  }
  [[unroll]] for (uint c = 0; c < NC; ++c) {
    const uint wn = min(n0 + 64u * c + t / 2u, pc.N - 1u), h = t % 2u;
    if (is_quant(DT_W)) {
      // The byte of row wn's block k0 / 32, and its scale (every block starts with it).
      const uint b = pc.off_w + (wn * (pc.K / 32u) + k0 / 32u) * block_bytes();
      const float d = unpackHalf2x16(uint(b2_u16[b >> 1])).x;
      if (DT_W == DT_Q4_0) {
        // Byte j of the quants holds element j (low nibble) and j + 16 (high): half h takes bytes
        // 8h .. 8h + 8, elements 8h .. and 16 + 8h ..
        [[unroll]] for (uint j = 0; j < 4u; ++j) {
          const uint q = uint(b2_u16[(b >> 1) + 1u + 4u * h + j]);
          wr[c][2u * j] = (float(q & 15u) - 8.0) * d;
          wr[c][2u * j + 1u] = (float((q >> 8) & 15u) - 8.0) * d;
          wr[c][8u + 2u * j] = (float((q >> 4) & 15u) - 8.0) * d;
          wr[c][8u + 2u * j + 1u] = (float(q >> 12) - 8.0) * d;
        }
      } else if (DT_W == DT_Q8_0) {
        // Half h: quant bytes 16h .. 16h + 16, two to a 16-bit load.
        [[unroll]] for (uint j = 0; j < 8u; ++j) {
          const uint q = uint(b2_u16[(b >> 1) + 1u + 8u * h + j]);
          wr[c][2u * j] = float(int(q << 24) >> 24) * d;
          wr[c][2u * j + 1u] = float(int(q << 16) >> 24) * d;
        }
      } else {
        // q4_1: d and m, then the quants laid out as q4_0's.
        const float mn = unpackHalf2x16(uint(b2_u16[(b >> 1) + 1u])).x;
        [[unroll]] for (uint j = 0; j < 4u; ++j) {
          const uint q = uint(b2_u16[(b >> 1) + 2u + 4u * h + j]);
          wr[c][2u * j] = float(q & 15u) * d + mn;
          wr[c][2u * j + 1u] = float((q >> 8) & 15u) * d + mn;
          wr[c][8u + 2u * j] = float((q >> 4) & 15u) * d + mn;
          wr[c][8u + 2u * j + 1u] = float(q >> 12) * d + mn;
        }
      }
    } else if (WVEC == 1u) {
      const uint e0 = pc.off_w + wn * pc.K + k0 + 16u * h;
      if (DT_W == DT_F32) {
        [[unroll]] for (uint v = 0; v < 4u; ++v) {
          const uvec4 q = wu4[e0 / 4u + v];
          [[unroll]] for (uint j = 0; j < 4u; ++j) wr[c][4u * v + j] = uintBitsToFloat(q[j]);
        }
      } else {
        [[unroll]] for (uint v = 0; v < 2u; ++v) {
          const uvec4 q = wu4[e0 / 8u + v];
          [[unroll]] for (uint j = 0; j < 4u; ++j) {
            const vec2 f = DT_W == DT_F16 ? unpackHalf2x16(q[j])
                                          : vec2(uintBitsToFloat(q[j] << 16), uintBitsToFloat(q[j] & 0xffff0000u));
            wr[c][8u * v + 2u * j] = f.x;
            wr[c][8u * v + 2u * j + 1u] = f.y;
          }
        }
      }
    } else {
      [[unroll]] for (uint e = 0; e < 16u; ++e) wr[c][e] = load2(DT_W, pc.off_w + wn * pc.K + k0 + 16u * h + e);
    }
  }
}

// The k (within the block) of wr[e].
uint w_k(const uint e) {
  if (DT_W == DT_Q4_0 || DT_W == DT_Q4_1) return (e < 8u ? 8u * (gl_LocalInvocationID.x % 2u) : 16u + 8u * (gl_LocalInvocationID.x % 2u)) + (e % 8u);
  return 16u * (gl_LocalInvocationID.x % 2u) + e;
}

void store_step() {
  const uint t = gl_LocalInvocationID.x;
  const uint xm = t / TPR, xk = XE * (t % TPR);
  [[unroll]] for (uint e = 0; e < XE; ++e) xs[(xk + e) * XR + xm / 4u][xm % 4u] = xr[e];
  [[unroll]] for (uint c = 0; c < NC; ++c) {
    const uint wn = 64u * c + t / 2u;
    [[unroll]] for (uint e = 0; e < 16u; ++e) ws[w_k(e) * WR + wn / 4u][wn % 4u] = wr[c][e];
  }
}

shared bool split_last;

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint tm = t / 16u, tn = t % 16u;
  const uint n0 = gl_WorkGroupID.x * BN, m0 = gl_WorkGroupID.y * BM;
  const uint nblk = pc.K / BK;
  const uint kb0 = SPLIT > 1u ? gl_WorkGroupID.z * (nblk / SPLIT) : 0u;
  const uint kb1 = SPLIT > 1u ? kb0 + nblk / SPLIT : nblk;

  vec4 acc[TM][NC];
  [[unroll]] for (uint i = 0; i < TM; ++i)
    [[unroll]] for (uint c = 0; c < NC; ++c) acc[i][c] = vec4(0.0);

  load_step(m0, n0, kb0 * BK);
  for (uint kb = kb0; kb < kb1; ++kb) {
    barrier();
    store_step();
    barrier();
    if (kb + 1u < kb1) load_step(m0, n0, (kb + 1u) * BK);
    // Unrolled 8 steps at a time (whole: no faster on an H200, and four times the code for a
    // CPU implementation of Vulkan to compile).
    for (uint k8 = 0; k8 < BK; k8 += 8u)
    [[unroll]] for (uint k = k8; k < k8 + 8u; ++k) {
      // This invocation's TM rows: a whole vec4 of the row, or half of one.
      const vec4 a = xs[k * XR + (TM * tm) / 4u];
      [[unroll]] for (uint c = 0; c < NC; ++c) {
        const vec4 w = ws[k * WR + 16u * c + tn];
        if (TM == 4u) {
          acc[0][c] += a.x * w;
          acc[1][c] += a.y * w;
          acc[2 % TM][c] += a.z * w;
          acc[3 % TM][c] += a.w * w;
        } else {
          const vec2 h = (tm % 2u) == 0u ? a.xy : a.zw;
          acc[0][c] += h.x * w;
          acc[1][c] += h.y * w;
        }
      }
    }
  }

  if (SPLIT > 1u) {
    const uint tile = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    const uint base = pc.off_part + tile * SPLIT * BM * BN;
    [[unroll]] for (uint i = 0; i < TM; ++i)
      [[unroll]] for (uint c = 0; c < NC; ++c)
        [[unroll]] for (uint j = 0; j < 4u; ++j)
          part[base + gl_WorkGroupID.z * BM * BN + (TM * tm + i) * BN + 64u * c + 4u * tn + j] = acc[i][c][j];
    memoryBarrierBuffer();
    barrier();
    if (t == 0u) split_last = atomicAdd(cnt[pc.off_cnt + tile], 1u) == SPLIT - 1u;
    barrier();
    if (!split_last) return;
    memoryBarrierBuffer();
    [[unroll]] for (uint i = 0; i < TM; ++i)
      [[unroll]] for (uint c = 0; c < NC; ++c)
        [[unroll]] for (uint j = 0; j < 4u; ++j) {
          float s = 0.0;
          for (uint z = 0; z < SPLIT; ++z) s += part[base + z * BM * BN + (TM * tm + i) * BN + 64u * c + 4u * tn + j];
          acc[i][c][j] = s;
        }
    if (t == 0u) cnt[pc.off_cnt + tile] = 0u;
  }

  [[unroll]] for (uint i = 0; i < TM; ++i) {
    const uint m = m0 + TM * tm + i;
    if (m >= pc.M) continue;
    [[unroll]] for (uint c = 0; c < NC; ++c)
    [[unroll]] for (uint j = 0; j < 4u; ++j) {
      const uint n = n0 + 64u * c + 4u * tn + j;
      if (n >= pc.N) continue;
      float v = acc[i][c][j];
      if (DT_BIAS != DT_NONE) v += load3(DT_BIAS, pc.off_b + n);
      v = apply_act(ACT, v);
      if (DT_RES != DT_NONE) v += load4(DT_RES, pc.off_r + m * pc.res_sm + n);
      store0(DT_Y, pc.off_y + m * pc.y_sm + n, v);
    }
  }
}
