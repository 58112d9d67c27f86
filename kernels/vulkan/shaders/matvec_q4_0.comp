#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// linear for one row of x with q4_0 weights (GGUF layout, used in place), on devices with
// subgroup arithmetic: y[n] = sum_k x[k] * W[n, k] + bias[n] + residual[n]. Bindings: 0 y, 1 x,
// 2 weight, 3 bias, 4 residual. MX rows of x (a batched decode step's, up to 8) take the same
// steps as one row alone, each with its own x, statistics, sums and subgroup reductions, the
// weight words loaded once for all of them: every row has the bits it has alone. Staged or read
// from memory, x gives the same sums (the block sums run over its slots in one order either way),
// so staging is a matter of speed only.
//
// Each workgroup owns pc.R rows of W; each subgroup takes RG of them at a time, its lanes split
// the row's blocks (a lane reads a whole 18-byte block as five 32-bit words, so its scale once
// per 32 weights) and one subgroupAdd per row ends the pass: no barrier between passes. x is
// staged once per workgroup in shared memory as f32, with the sum of each 32-block, when it
// fits; the two barriers that costs are why a workgroup covers many rows. Against
// matvec_body.glsl's kernel on an H100 with warm clocks (two runs): 2048x8192 1848 / 1850 vs
// 1828 / 1819 GB/s, 2048x131072 1885 / 1882 vs 1859 / 1647 GB/s; with several rows of x that
// kernel was ahead, so it keeps them. In a whole Llama-1B q4_0 decode step (norm and glu folded
// in) this kernel gives 672-675 tok/s against 583-585 through that one, although alone, each
// projection waiting for the one before, that one is 10-30% faster at Llama's shapes
// (vrun_bench_vulkan --q4-tune). A subgroup's first blocks are requested before x is staged:
// alone at 2048 x 8192 (x not staged), 628 against 370 GB/s.
#include "common.glsl"

layout(local_size_x_id = 9) in;
layout(constant_id = 9) const uint WG = 128;

layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 2) const uint DT_Y = 0;
layout(constant_id = 3) const uint DT_BIAS = DT_NONE;
// 1: x starts 16 bytes aligned (read 4 elements at a time when it is not staged).
layout(constant_id = 7) const uint XVEC = 0;
// Floats of x kept in shared memory: K when that fits, else 0 (x is read from memory).
layout(constant_id = 10) const uint XSN = 0;
layout(constant_id = 12) const uint DT_RES = DT_NONE;
// Norm prologue (linear's norm attribute): 0 none, 1 layer, 2 rms, with two-pass statistics as in
// matvec_body.glsl, applied to x as it is staged or, unstaged, as it is loaded (the same values).
// Bindings 5 (norm weight), 6 (norm bias).
layout(constant_id = 13) const uint NORM = 0;
layout(constant_id = 14) const uint DT_G = DT_NONE;
layout(constant_id = 15) const uint DT_BETA = DT_NONE;
BINDING(5)
BINDING(6)
// 1: linear's glu = silu: x holds 2K elements and the kernel takes x[k] * silu(x[K + k]) (f32),
// gated as x is staged (or, unstaged, as it is loaded).
layout(constant_id = 16) const uint GLU = 0;
// act on x W^T + bias, before the residual (1 gelu, 2 silu).
layout(constant_id = 17) const uint ACT = 0;
// Rows of x (1-8): row m at x_sm elements after row m - 1, its y N after, its residual r_sm after.
layout(constant_id = 19) const uint MX = 1;

layout(set = 0, binding = 1, std430) readonly buffer XF4 { vec4 xf4[]; };
layout(set = 0, binding = 1, std430) readonly buffer XU2 { uvec2 xu2[]; };
layout(set = 0, binding = 2, std430) readonly buffer WU32 { uint wu32[]; };

layout(push_constant) uniform Push {
  uint N, K;
  uint x_sm;
  uint off_y, off_x, off_w, off_b;  // elements; off_w is in bytes
  uint R;                           // rows of W per workgroup
  uint off_r;                       // residual's first element
  float eps;
  uint off_g, off_beta;             // norm weight and bias, first elements
  uint r_sm;                        // the residual's rows' stride (elements)
} pc;

// 1: a lane requests its next block's words before it computes on the current one (two blocks'
// loads in flight instead of one when a row has more blocks than the subgroup has lanes).
layout(constant_id = 18) const uint PF = 0;

// Rows a subgroup works on at once (their loads all issued before any is used), one block of each
// a lane: at 2048x131072 1880 GB/s, against 1750 for 2 rows of two blocks and 1830 for 4 rows of
// two blocks.
layout(constant_id = 11) const uint RG = 4;

const uint XS = XSN > 0u ? 1u : 0u;
// x as f32, 16 bytes a slot; within each 32-block the slots are permuted by the block's index so
// that lanes reading consecutive blocks hit different banks.
shared vec4 xs[XS == 1u ? MX * XSN / 4u : 1u];
shared float xsb[XS == 1u ? MX * XSN / 32u : 1u];
uint swz(uint s4) { return s4 ^ ((s4 >> 3) & 7u); }
shared float nred[NORM != 0u ? WG : 1u];

// Sum of v over the workgroup, every invocation getting it.
float wg_sum(float v) {
  const float s = subgroupAdd(v);
  if (subgroupElect()) nred[gl_SubgroupID] = s;
  barrier();
  float r = 0.0;
  for (uint p = 0; p < gl_NumSubgroups; ++p) r += nred[p];
  barrier();
  return r;
}

vec4 load5x4(uint k) {
  return vec4(load5(DT_G, k), load5(DT_G, k + 1u), load5(DT_G, k + 2u), load5(DT_G, k + 3u));
}
vec4 load6x4(uint k) {
  return vec4(load6(DT_BETA, k), load6(DT_BETA, k + 1u), load6(DT_BETA, k + 2u), load6(DT_BETA, k + 3u));
}

// x's elements xo .. xo + 4 as stored; vector loads need XVEC and xo % 4 == 0.
vec4 xraw4(uint xo, bool vec) {
  if (vec && XVEC == 1 && DT_X == DT_F32) return xf4[xo >> 2];
  if (vec && XVEC == 1 && DT_X == DT_F16) {
    const uvec2 p = xu2[xo >> 2];
    return vec4(unpackHalf2x16(p.x), unpackHalf2x16(p.y));
  }
  return vec4(load1(DT_X, xo), load1(DT_X, xo + 1u), load1(DT_X, xo + 2u), load1(DT_X, xo + 3u));
}

// Elements xo .. xo + 4 of the x the dot products take: gated (first half times silu of the
// second, K further on) for GLU.
vec4 xin4(uint xo, bool vec) {
  const vec4 a = xraw4(xo, vec);
  if (GLU == 0u) return a;
  const vec4 g = xraw4(xo + pc.K, vec);
  return a * silu4(g);
}

// Row m's norm statistics (norm_stats) and its x normalised: (v - mean) * rstd * g (+ beta) for
// the 4 elements from k.
float nmean[MX], nrstd[MX];
vec4 normed(vec4 v, uint m, uint k) {
  v = (v - nmean[m]) * nrstd[m] * load5x4(pc.off_g + k);
  if (DT_BETA != DT_NONE) v += load6x4(pc.off_beta + k);
  return v;
}

// Slot s (elements 4 s .. + 4) of row m's x as the dot products take it before any norm: staged,
// or read (and gated) from memory.
vec4 xslot(uint m, uint s) {
  if (XS == 1u) return xs[m * (pc.K >> 2) + swz(s)];
  return xin4(pc.off_x + m * pc.x_sm + 4u * s, false);
}

// Two-pass statistics of row m over the slots each invocation stages (the same sums staged or
// not); every invocation of the workgroup calls it.
void norm_stats(uint m) {
  const uint t = gl_LocalInvocationID.x, q4 = pc.K >> 2;
  const float inv_k = 1.0 / float(pc.K);
  float mean = 0.0, q = 0.0;
  if (NORM == 1u) {
    float s1 = 0.0;
    for (uint s = t; s < q4; s += WG) s1 += dot(xslot(m, s), vec4(1.0));
    mean = wg_sum(s1) * inv_k;
  }
  for (uint s = t; s < q4; s += WG) {
    const vec4 d = xslot(m, s) - mean;
    q += dot(d, d);
  }
  nmean[m] = mean;
  nrstd[m] = inversesqrt(wg_sum(q) * inv_k + pc.eps);
}

// x[32 b + 4 c .. + 4) of row m (xm: its first element; xq: its first slot in xs), normalised.
vec4 xblk(uint b, uint c, uint m, uint xm, uint xq) {
  if (XS == 1u) return xs[xq + swz(b * 8u + c)];
  const vec4 v = xin4(xm + b * 32u + 4u * c, true);
  return NORM != 0u ? normed(v, m, b * 32u + 4u * c) : v;
}

// 1 + (4-bit field of q at bit s) / 16, in [1, 2): the bits placed in a float's mantissa (exact;
// cheaper than an integer-to-float conversion).
float nib(uint q, uint s) { return uintBitsToFloat((((q >> s) & 15u) << 19) | 0x3F800000u); }
uint fun16(uint lo, uint hi) { return (lo >> 16) | (hi << 16); }

// The words of block b of rows rows[0..RG) (an 18-byte block at an even byte, read as the five
// 32-bit words that cover it), all issued before any is used.
uint w[RG][5];
uint rows[RG];
void load_blocks(uint b, uint nb) {
  [[unroll]] for (uint r = 0; r < RG; ++r) {
    const uint a = pc.off_w + (rows[r] * nb + b) * 18u;
    [[unroll]] for (uint j = 0; j < 5u; ++j) w[r][j] = wu32[(a >> 2) + j];
  }
}

void main() {
  const uint row0 = flat_group() * pc.R;
  if (row0 >= pc.N) return;
  const uint rend = min(row0 + pc.R, pc.N);
  const uint t = gl_LocalInvocationID.x;
  const uint nb = pc.K >> 5;
  const uint S = gl_SubgroupSize, lane = gl_SubgroupInvocationID;

  // The first step's weights are requested before x is staged, so that the two memory latencies
  // overlap instead of adding up (staging ends in a barrier).
  const uint rb0 = row0 + gl_SubgroupID * RG;
  [[unroll]] for (uint r = 0; r < RG; ++r) rows[r] = min(rb0 + r, pc.N - 1u);
  bool loaded = false;
  if (rb0 < rend && lane < nb) {
    load_blocks(lane, nb);
    loaded = true;
  }

  if (XS == 1u) {
    const uint q4 = pc.K >> 2;
    [[unroll]] for (uint m = 0; m < MX; ++m) {
      const uint xq = m * q4;
      for (uint s = t; s < q4; s += WG) {
        xs[xq + swz(s)] = xin4(pc.off_x + m * pc.x_sm + 4u * s, false);
      }
      if (NORM != 0u) {
        // Each invocation normalises the slots it staged: only the statistics cross invocations.
        norm_stats(m);
        for (uint s = t; s < q4; s += WG) xs[xq + swz(s)] = normed(xs[xq + swz(s)], m, 4u * s);
      }
    }
    barrier();
    for (uint i = t; i < MX * nb; i += WG) {
      const uint m = i / nb, b = i - m * nb;
      vec4 a = vec4(0.0);
      [[unroll]] for (uint c = 0; c < 8u; ++c) a += xs[m * q4 + swz(b * 8u + c)];
      xsb[i] = (a.x + a.y) + (a.z + a.w);
    }
    barrier();
  } else if (NORM != 0u) {
    [[unroll]] for (uint m = 0; m < MX; ++m) norm_stats(m);
  }

  for (uint rb = rb0; rb < rend; rb += gl_NumSubgroups * RG) {
    float acc[MX][RG];
    [[unroll]] for (uint r = 0; r < RG; ++r) {
      [[unroll]] for (uint m = 0; m < MX; ++m) acc[m][r] = 0.0;
      rows[r] = min(rb + r, pc.N - 1u);
    }
    for (uint b = lane; b < nb; b += S) {
      if (!loaded) load_blocks(b, nb);
      loaded = false;
      uint cur[RG][5];
      [[unroll]] for (uint r = 0; r < RG; ++r)
        [[unroll]] for (uint j = 0; j < 5u; ++j) cur[r][j] = w[r][j];
      if (PF == 1u && b + S < nb) {
        load_blocks(b + S, nb);
        loaded = true;
      }
      [[unroll]] for (uint m = 0; m < MX; ++m) {
        const uint xm = pc.off_x + m * pc.x_sm, xq = m * (pc.K >> 2);
        vec4 xv[8];
        [[unroll]] for (uint c = 0; c < 8u; ++c) xv[c] = xblk(b, c, m, xm, xq);
        float xsum;
        if (XS == 1u) {
          xsum = xsb[m * nb + b];
        } else {
          vec4 a = vec4(0.0);
          [[unroll]] for (uint c = 0; c < 8u; ++c) a += xv[c];
          xsum = (a.x + a.y) + (a.z + a.w);
        }
        [[unroll]] for (uint r = 0; r < RG; ++r) {
          // Block: f16 scale at byte 0, quants at byte 2; it starts at an even byte, so either at a
          // word (quants straddle words) or 2 bytes in (quants are words 1..4).
          const bool mid = ((pc.off_w + (rows[r] * nb + b) * 18u) & 2u) != 0u;
          const uint d = mid ? (cur[r][0] >> 16) : (cur[r][0] & 0xffffu);
          // Byte j holds element j in its low nibble and j + 16 in its high one.
          float s0 = 0.0, s1 = 0.0;
          [[unroll]] for (uint j = 0; j < 4u; ++j) {
            const uint q = mid ? cur[r][j + 1u] : fun16(cur[r][j], cur[r][j + 1u]);
            s0 += nib(q, 0u) * xv[j].x;
            s0 += nib(q, 8u) * xv[j].y;
            s0 += nib(q, 16u) * xv[j].z;
            s0 += nib(q, 24u) * xv[j].w;
            s1 += nib(q, 4u) * xv[4u + j].x;
            s1 += nib(q, 12u) * xv[4u + j].y;
            s1 += nib(q, 20u) * xv[4u + j].z;
            s1 += nib(q, 28u) * xv[4u + j].w;
          }
          // sum (1 + q / 16) x = S, and q4_0 values are (q - 8) d: sum (q - 8) x = 16 S - 24 sum x.
          acc[m][r] += unpackHalf2x16(d).x * (16.0 * (s0 + s1) - 24.0 * xsum);
        }
      }
    }
    [[unroll]] for (uint m = 0; m < MX; ++m)
      [[unroll]] for (uint r = 0; r < RG; ++r) {
        const float s = subgroupAdd(acc[m][r]);
        const uint n = rb + r;
        if (lane == 0u && n < rend) {
          const float bv = DT_BIAS != DT_NONE ? load3(DT_BIAS, pc.off_b + n) : 0.0;
          float v = s + bv;
          v = apply_act(ACT, v);
          if (DT_RES != DT_NONE) v += load4(DT_RES, pc.off_r + m * pc.r_sm + n);
          store0(DT_Y, pc.off_y + m * pc.N + n, v);
        }
      }
  }
}
