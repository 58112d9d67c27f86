// Body of the cooperative-matrix (tensor core) linear kernel for f16 or f32 x and f16 W [N, K]; the
// NV and KHR variants define the matrix types and load/store/multiply macros, then include
// this. The tile shape is a set of specialisation constants: WGM x WGN subgroups (32
// invocations each, checked on the host), each computing an FM x FN grid of 16x16 fragments, so
// a workgroup covers BM = 16 WGM FM rows by BN = 16 WGN FN columns; K advances BK at a time
// through shared memory kept as 16-byte words (one store per 8 halves); the next step's global
// loads are issued before the current step's multiplies, so their latency hides behind the
// tensor-core work. STAGES = 2 keeps two K steps' tiles in shared memory: the multiplies read one
// while the next is stored into the other, one barrier a step instead of two. The host
// guarantees K % 8 == 0 and rows aligned to 8 elements.
// An f32 x is rounded to f16 as it is loaded (the tensor cores multiply halves; sums stay f32).
// Accumulates in f32; bias and the output dtype are applied while each fragment is written out
// through a per-subgroup staging area (16 x 16 floats in the tiles' shared memory, once the last
// step's multiplies are done with it).
// IS_LINEAR = 0 makes it a batched matmul (bmm): A [M, K] and B [K, N] per batch through the
// push constants' strides (gl_WorkGroupID.z walks the batches), each read along K (a_sk = b_sk = 1,
// which the host checks), B f16 or f32 (rounded to f16 as it loads), no bias.
// B_GATHER = 1 (bmm): B is read one element at a time through both of its strides (b_sk along K,
// b_sn along N), so any layout takes the tensor cores (attention's V, N contiguous, is the case),
// and K need not be a multiple of 8: the elements of the last 8-chunk past K are zeros in A and B.
// A residual (binding 4, DT_RES, rows res_sm apart; linear only) is added with the bias as each
// fragment is written, so a projection that feeds a residual sum needs no add kernel after it.
// ACT applies linear's act (1 gelu, 2 silu) after the bias, before the residual.
// REL = 1 (bmm with B [K, 2M - 1]) writes y [M, M] = rel_shift(A B): y[i][j] = (A B)[i][j - i + M - 1].
// Tile row m0 .. m0 + BM - 1 needs B's columns M - m0 - BM .. 2M - 2 - m0, so gl_WorkGroupID.x
// walks that window (the host sizes the grid for M + BM - 1 columns) and each product is written
// where the shifted view keeps it: half the products of the full A B, written dense.
// Bindings: 0 y, 1 x, 2 W, 3 bias, 4 residual.

layout(local_size_x_id = 10) in;
layout(constant_id = 5) const uint WGM = 2;
layout(constant_id = 6) const uint WGN = 4;
layout(constant_id = 7) const uint FM = 4;
layout(constant_id = 8) const uint FN = 4;
layout(constant_id = 9) const uint BK = 32;
// Invocations: 32 WGM WGN (the local size, given by the host as this constant).
layout(constant_id = 10) const uint NT = 256;
layout(constant_id = 0) const uint DT_Y = 0;
layout(constant_id = 1) const uint DT_BIAS = DT_NONE;
layout(constant_id = 2) const uint DT_A = DT_F16;
// W f16, or block-quantised (q8_0 / q4_0 / q4_1, GGUF layout in place, K % 32 == 0): blocks are
// expanded to halves as the tile loads, so quantised checkpoints prefill on the tensor cores too.
layout(constant_id = 3) const uint DT_B = DT_F16;
layout(constant_id = 4) const uint IS_LINEAR = 1;
layout(constant_id = 11) const uint STAGES = 1;
layout(constant_id = 12) const uint DT_RES = DT_NONE;
layout(constant_id = 13) const uint ACT = 0;
layout(constant_id = 14) const uint REL = 0;
layout(constant_id = 15) const uint B_GATHER = 0;

#include "matmul_push.glsl"

layout(set = 0, binding = 1, std430) buffer BufA4 { uvec4 a4[]; };
layout(set = 0, binding = 1, std430) buffer BufAF4 { vec4 af4[]; };
layout(set = 0, binding = 2, std430) buffer BufB4 { uvec4 w4[]; };
layout(set = 0, binding = 2, std430) buffer BufBF4 { vec4 wf4[]; };

const uint BM = 16u * WGM * FM, BN = 16u * WGN * FN;
const uint CH = BK / 8u;          // 16-byte chunks per row and step
const uint LDS4 = CH + 1u;        // padded row stride in 16-byte words (against bank conflicts)
const uint PA = BM * CH / NT;     // chunks per invocation and step: A
const uint PB = BN * CH / NT;     // and B
const uint TILE4 = (BM + BN) * LDS4;  // one stage: A [m][k], then B [n][k] (column-major K x N)
// The stages, then each subgroup's 16 x 16 f32 staging area (64 words; the host checks that the
// stages hold them all).
shared uvec4 S[STAGES * TILE4];

// Eight consecutive elements of x starting at element e (a multiple of 8), as packed halves.
uvec4 load_a8(uint e) {
  if (DT_A == DT_F32) {
    vec4 lo = af4[e / 4u], hi = af4[e / 4u + 1u];
    return uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw));
  }
  return a4[e / 8u];
}

uint b_base = 0;  // this batch's B, in elements (bmm)

// As load_a8, for the chunk that K ends in (B_GATHER): elements from K on read as zeros.
uvec4 load_a8_tail(uint e, uint k) {
  float v[8];
  [[unroll]] for (uint j = 0; j < 8u; ++j) v[j] = k + j < pc.K ? load1(DT_A, e + j) : 0.0;
  return uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])), packHalf2x16(vec2(v[4], v[5])),
               packHalf2x16(vec2(v[6], v[7])));
}

// Weights n, k .. k + 8 (k a multiple of 8) as packed halves.
uvec4 load_b8(uint n, uint k) {
  if (IS_LINEAR == 0 && B_GATHER == 1u) {
    const uint e = b_base + n * pc.b_sn + k * pc.b_sk;
    float v[8];
    [[unroll]] for (uint j = 0; j < 8u; ++j) v[j] = k + j < pc.K ? load2(DT_B, e + j * pc.b_sk) : 0.0;
    return uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])), packHalf2x16(vec2(v[4], v[5])),
                 packHalf2x16(vec2(v[6], v[7])));
  }
  if (IS_LINEAR == 0) {
    const uint e = b_base + n * pc.b_sn + k;
    if (DT_B == DT_F32) {
      vec4 lo = wf4[e / 4u], hi = wf4[e / 4u + 1u];
      return uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw));
    }
    return w4[e / 8u];
  }
  if (DT_B == DT_F16) return w4[(pc.off_b + n * pc.K + k) / 8u];
  const uint BB = DT_B == DT_Q8_0 ? 34u : DT_B == DT_Q4_0 ? 18u : 20u;
  const uint base = pc.off_b + (n * (pc.K / 32u) + k / 32u) * BB;  // bytes, even
  const uint c = (k % 32u) / 8u;
  const float d = unpackHalf2x16(uint(b2_u16[base / 2u])).x;
  float v[8];
  if (DT_B == DT_Q8_0) {
    const uint h = (base + 2u + 8u * c) / 2u;
    [[unroll]] for (uint j = 0; j < 4u; ++j) {
      const uint p = uint(b2_u16[h + j]);
      v[2u * j] = d * float(int(p << 24) >> 24);
      v[2u * j + 1u] = d * float(int(p << 16) >> 24);
    }
  } else {
    // Byte i of a 4-bit block holds element i (low nibble) and i + 16 (high nibble).
    const uint q0 = DT_B == DT_Q4_1 ? 4u : 2u;
    const float mn = DT_B == DT_Q4_1 ? unpackHalf2x16(uint(b2_u16[base / 2u + 1u])).x : -8.0 * d;
    const uint h = (base + q0 + 8u * (c % 2u)) / 2u, sh = c / 2u * 4u;
    [[unroll]] for (uint j = 0; j < 4u; ++j) {
      const uint p = uint(b2_u16[h + j]);
      v[2u * j] = float((p >> sh) & 15u) * d + mn;
      v[2u * j + 1u] = float((p >> (sh + 8u)) & 15u) * d + mn;
    }
  }
  return uvec4(packHalf2x16(vec2(v[0], v[1])), packHalf2x16(vec2(v[2], v[3])), packHalf2x16(vec2(v[4], v[5])),
               packHalf2x16(vec2(v[6], v[7])));
}

uvec4 ra[PA], rb[PB];  // the next K step's chunks, on their way from global memory
uint a_base, m0, n0;

// Global loads of the K step at k1 into ra / rb (zeros past the edges).
void fetch(uint t, uint k1) {
  [[unroll]] for (uint p = 0; p < PA; ++p) {
    uint c = t + p * NT, r = c / CH, k = k1 + (c % CH) * 8u;
    uint m = m0 + r;
    if (B_GATHER == 1u && k + 8u > pc.K)
      ra[p] = (m < pc.M && k < pc.K) ? load_a8_tail(a_base + m * pc.a_sm + k, k) : uvec4(0);
    else
      ra[p] = (m < pc.M && k < pc.K) ? load_a8(a_base + m * pc.a_sm + k) : uvec4(0);
  }
  [[unroll]] for (uint p = 0; p < PB; ++p) {
    uint c = t + p * NT, r = c / CH, k = k1 + (c % CH) * 8u;
    uint n = n0 + r;
    rb[p] = (n < pc.N && k < pc.K) ? load_b8(n, k) : uvec4(0);
  }
}

// ra / rb into the stage starting at word s0.
void put(uint t, uint s0) {
  [[unroll]] for (uint p = 0; p < PA; ++p) {
    uint c = t + p * NT;
    S[s0 + (c / CH) * LDS4 + c % CH] = ra[p];
  }
  [[unroll]] for (uint p = 0; p < PB; ++p) {
    uint c = t + p * NT;
    S[s0 + BM * LDS4 + (c / CH) * LDS4 + c % CH] = rb[p];
  }
}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint warp = t / 32u, lane = t % 32u;
  uint wm = (warp / WGN) * (16u * FM), wn = (warp % WGN) * (16u * FN);
  m0 = gl_WorkGroupID.y * BM;
  // REL: the window's first column may lie before column 0 (as a uint it wraps, and the edge
  // checks n < N treat it, and every column it reaches below 0, as outside).
  n0 = REL == 1u ? (pc.M - 1u) - (m0 + BM - 1u) + gl_WorkGroupID.x * BN : gl_WorkGroupID.x * BN;
  a_base = pc.off_a;
  uint y_base = pc.off_y;
  if (IS_LINEAR == 0) {
    uint z = gl_WorkGroupID.z, i2 = z % pc.nb2, i1 = (z / pc.nb2) % pc.nb1, i0 = z / (pc.nb2 * pc.nb1);
    a_base += i0 * pc.a_sb0 + i1 * pc.a_sb1 + i2 * pc.a_sb2;
    b_base = pc.off_b + i0 * pc.b_sb0 + i1 * pc.b_sb1 + i2 * pc.b_sb2;
    y_base += z * pc.M * (REL == 1u ? pc.M : pc.N);
  }

  C_T acc[FM][FN];
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = C_T(0.0);

  fetch(t, 0u);
  if (STAGES > 1u) {
    put(t, 0u);
    barrier();
  }
  uint s0 = 0;  // the stage the multiplies read
  for (uint k0 = 0; k0 < pc.K; k0 += BK) {
    if (STAGES == 1u) {
      barrier();  // the previous step's multiplies are done with the tiles
      put(t, 0u);
      barrier();
    }
    uint k1 = k0 + BK;
    if (k1 < pc.K) fetch(t, k1);
    [[unroll]] for (uint kk = 0; kk < CH; kk += 2u) {  // 16 halves = 2 words per fragment step
      A_T a[FM];
      B_T b[FN];
      [[unroll]] for (uint i = 0; i < FM; ++i) LOAD_A(a[i], S, s0 + (wm + 16u * i) * LDS4 + kk, LDS4);
      [[unroll]] for (uint j = 0; j < FN; ++j) LOAD_B(b[j], S, s0 + (BM + wn + 16u * j) * LDS4 + kk, LDS4);
      [[unroll]] for (uint i = 0; i < FM; ++i)
        [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = MMA(a[i], b[j], acc[i][j]);
    }
    if (STAGES > 1u) {
      // The other stage was last read in the step before this one, which every subgroup has
      // finished (the barrier below it), so it can take the next step now.
      s0 = TILE4 - s0;
      if (k1 < pc.K) put(t, s0);
      barrier();
    }
  }
  barrier();  // every subgroup is done with the tiles before they hold the staging areas
  const uint cs = warp * 64u;
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) {
      STORE_C(acc[i][j], S, cs, 4u);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < 256u; e += 32u) {
        uint m = m0 + wm + 16u * i + e / 16u, n = n0 + wn + 16u * j + e % 16u;
        if (REL == 1u) {
          // j = n + m - (M - 1), kept when 0 <= j < M (n < N follows).
          const uint j = n + m + 1u - pc.M;
          if (m < pc.M && n < pc.N && n + m + 1u >= pc.M && j < pc.M)
            store0(DT_Y, y_base + m * pc.M + j, uintBitsToFloat(S[cs + e / 4u][e % 4u]));
        } else if (m < pc.M && n < pc.N) {
          store0(DT_Y, y_base + m * pc.N + n, linear_epilogue(m, n, uintBitsToFloat(S[cs + e / 4u][e % 4u])));
        }
      }
      subgroupBarrier();
    }
}
