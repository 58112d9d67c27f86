// linear for few rows (decode): y[m, n] = sum_k x[m, k] * W[n, k] + bias[n] + residual[m, n],
// m < MR <= 8. Included by matvec.comp (subgroup reduction) and matvec_shared.comp (shared-memory
// reduction, for devices without subgroup arithmetic). Bindings: 0 y, 1 x, 2 weight, 3 bias,
// 4 residual (a transformer's skip connection: added here, it costs no pass of its own). One row
// of x with q4_0 weights goes to matvec_q4_0.comp instead where subgroups allow.
//
// Decode is bound by reading W once. One workgroup computes RS rows of W together: all of its
// invocations split K between them (consecutive invocations read consecutive 16-byte chunks or
// half-blocks, so every warp-wide load is one contiguous run of memory), each loads its chunks of
// all RS rows before using any (many loads in flight per invocation), and one x chunk loaded
// serves RS rows and, through the L1 cache, every workgroup on the core. Quantised blocks are
// only 2-byte aligned (GGUF layout, used in place) and are read as 32-bit words, re-aligned in
// registers. The partial sums meet in one subgroupAdd per output plus one pass over a few
// shared-memory words.

// Invocations per workgroup (32, 64 or 128): fewer for short rows, so that each has work.
layout(local_size_x_id = 9) in;
layout(constant_id = 9) const uint WG = 128;

layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint DT_W = 0;
layout(constant_id = 2) const uint DT_Y = 0;
layout(constant_id = 3) const uint DT_BIAS = DT_NONE;
// Rows of x (1..8): a constant, so the accumulators stay in registers.
layout(constant_id = 4) const uint MR = 1;
// Rows of W per workgroup.
layout(constant_id = 5) const uint RS = 1;
// 1: float weight rows start 16 bytes aligned and K % 8 == 0: 16-byte loads of W.
layout(constant_id = 6) const uint WVEC = 0;
// 1: x rows start 16 bytes aligned (x is read 8 elements at a time: 16-byte loads for f16/bf16,
// two for f32).
layout(constant_id = 7) const uint XVEC = 0;
// 1: q4_1 rows start 4 bytes aligned (20-byte blocks keep it): 32-bit loads of W.
layout(constant_id = 8) const uint A4 = 0;
layout(constant_id = 10) const uint DT_RES = DT_NONE;
// Norm (linear's norm attribute): 0 none, 1 layer, 2 rms, with no pass over x of its own (a
// prologue that normalised x in shared memory cost the Llama-1B decode step 20%: its barriers
// delay every workgroup's first weight loads). The dot products take g * x (g the norm weight),
// each invocation sums x and x^2 over the elements it loads (every element of a row is loaded
// once per workgroup), and the epilogue applies the statistics:
//   rms:   y = rstd * sum_k w (g x)
//   layer: y = rstd * (sum_k w (g x) - mean * sum_k w g) + sum_k w beta
// where sum w g and sum w beta come from two extra "rows" of x (g and beta themselves) run through
// the same dot-product code, so quantised weights need nothing of their own.
// Bindings 5 (norm weight) and 6 (norm bias), both [K].
layout(constant_id = 11) const uint NORM = 0;
layout(constant_id = 12) const uint DT_G = DT_NONE;
layout(constant_id = 13) const uint DT_BETA = DT_NONE;
BINDING(5)
BINDING(6)
// 1: linear's glu = silu: x's rows hold 2K elements and the dot products take
// x[k] * silu(x[K + k]) (f32), gated as each element is loaded.
layout(constant_id = 14) const uint GLU = 0;
// linear's act on x W^T + bias, before the residual (1 gelu, 2 silu; Whisper's fc1: the
// activation costs no pass of its own).
layout(constant_id = 15) const uint ACT = 0;

layout(set = 0, binding = 1, std430) readonly buffer XF4 { vec4 xf4[]; };
layout(set = 0, binding = 1, std430) readonly buffer XU4 { uvec4 xu4[]; };
layout(set = 0, binding = 2, std430) readonly buffer WU4 { uvec4 wu4[]; };
layout(set = 0, binding = 2, std430) readonly buffer WU32 { uint wu32[]; };
layout(set = 0, binding = 2, std430) readonly buffer WU16 { uint16_t wu16[]; };

layout(push_constant) uniform Push {
  uint N, K;
  uint x_sm;
  uint off_y, off_x, off_w, off_b;  // elements; off_w is in bytes for block-quantised weights
  uint off_r, r_sm;                 // residual: first element, rows' stride (elements)
  float eps;
  uint off_g, off_beta;             // norm weight and bias, first elements
} pc;

// Chunks each invocation has in flight per row.
layout(constant_id = 16) const uint U = 2;
// Rows of x the dot products run over: x's MR, then (layer norm) g and beta.
const uint MX = MR + (NORM == 1u ? 2u : 0u);
const uint NACC = RS * MX;
// Accumulators: the dot products, then each row's sum of x (layer norm) and sum of x^2 (norm; at
// SQ). An RMS norm keeps no sum of x: eight rows of x with it run at two rows of W a workgroup,
// and eight fewer accumulators leave more registers (and shared memory) to the dot products.
const uint NS = NORM == 1u ? 2u * MR : NORM == 2u ? MR : 0u;
const uint SQ = NACC + (NORM == 1u ? MR : 0u);
const uint NA = NACC + NS;
shared float red[NA * WG];

// x[xo .. xo + 8) as floats (x's last dim is dense).
void load_x8(uint xo, out float v[8]) {
  if (XVEC == 1 && DT_X == DT_F32) {
    vec4 a = xf4[xo >> 2], b = xf4[(xo >> 2) + 1u];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  } else if (XVEC == 1 && DT_X == DT_F16) {
    uvec4 p = xu4[xo >> 3];
    vec2 h;
    h = unpackHalf2x16(p.x); v[0] = h.x; v[1] = h.y;
    h = unpackHalf2x16(p.y); v[2] = h.x; v[3] = h.y;
    h = unpackHalf2x16(p.z); v[4] = h.x; v[5] = h.y;
    h = unpackHalf2x16(p.w); v[6] = h.x; v[7] = h.y;
  } else if (XVEC == 1 && DT_X == DT_BF16) {
    uvec4 p = xu4[xo >> 3];
    v[0] = uintBitsToFloat(p.x << 16); v[1] = uintBitsToFloat(p.x & 0xffff0000u);
    v[2] = uintBitsToFloat(p.y << 16); v[3] = uintBitsToFloat(p.y & 0xffff0000u);
    v[4] = uintBitsToFloat(p.z << 16); v[5] = uintBitsToFloat(p.z & 0xffff0000u);
    v[6] = uintBitsToFloat(p.w << 16); v[7] = uintBitsToFloat(p.w & 0xffff0000u);
  } else {
    [[unroll]] for (uint j = 0; j < 8u; ++j) v[j] = load1(DT_X, xo + j);
  }
}

float acc[NA];

// Row m of x, elements k .. k + 8 (gated: the first half times silu of the second).
void load_xrow8(uint m, uint k, out float v[8]) {
  const uint xo = pc.off_x + m * pc.x_sm + k;
  load_x8(xo, v);
  if (GLU == 1u) {
    float g[8];
    load_x8(xo + pc.K, g);
    [[unroll]] for (uint j = 0; j < 8u; ++j) v[j] *= silu(g[j]);
  }
}

float load_xrow1(uint m, uint k) {
  const uint xo = pc.off_x + m * pc.x_sm + k;
  const float v = load1(DT_X, xo);
  return GLU == 1u ? v * silu(load1(DT_X, xo + pc.K)) : v;
}

// Element k of g (m == MR) or beta (m == MR + 1; 0 without one).
float load_param1(uint m, uint k) {
  return m == MR ? load5(DT_G, pc.off_g + k) : DT_BETA != DT_NONE ? load6(DT_BETA, pc.off_beta + k) : 0.0;
}

void load_param8(uint m, uint k, out float v[8]) {
  [[unroll]] for (uint j = 0; j < 8u; ++j) v[j] = load_param1(m, k + j);
}

// Row m of the dot products' x, elements k .. k + 8: x itself, or (norm) g * x with the row's
// statistics gathered on the way, or g / beta.
void load_xr8(uint m, uint k, out float v[8]) {
  if (NORM != 0u && m >= MR) {
    load_param8(m, k, v);
    return;
  }
  load_xrow8(m, k, v);
  if (NORM != 0u) {
    float g[8];
    load_param8(MR, k, g);
    [[unroll]] for (uint j = 0; j < 8u; ++j) {
      if (NORM == 1u) acc[NACC + m] += v[j];
      acc[SQ + m] += v[j] * v[j];
      v[j] *= g[j];
    }
  }
}

float load_xr1(uint m, uint k) {
  if (NORM != 0u && m >= MR) return load_param1(m, k);
  const float v = load_xrow1(m, k);
  if (NORM == 0u) return v;
  if (NORM == 1u) acc[NACC + m] += v;
  acc[SQ + m] += v * v;
  return v * load_param1(MR, k);
}

// Eight f16 or bf16 weights from one 16-byte load.
void unpack8(uvec4 p, out float w[8]) {
  if (DT_W == DT_BF16) {
    w[0] = uintBitsToFloat(p.x << 16); w[1] = uintBitsToFloat(p.x & 0xffff0000u);
    w[2] = uintBitsToFloat(p.y << 16); w[3] = uintBitsToFloat(p.y & 0xffff0000u);
    w[4] = uintBitsToFloat(p.z << 16); w[5] = uintBitsToFloat(p.z & 0xffff0000u);
    w[6] = uintBitsToFloat(p.w << 16); w[7] = uintBitsToFloat(p.w & 0xffff0000u);
  } else {
    vec2 h;
    h = unpackHalf2x16(p.x); w[0] = h.x; w[1] = h.y;
    h = unpackHalf2x16(p.y); w[2] = h.x; w[3] = h.y;
    h = unpackHalf2x16(p.z); w[4] = h.x; w[5] = h.y;
    h = unpackHalf2x16(p.w); w[6] = h.x; w[7] = h.y;
  }
}

// Quants turned into floats by placing their bits in a float's mantissa: exact, and two full-rate
// ALU operations where an integer-to-float conversion runs at a quarter of the rate.
// 1 + (4-bit field of q at bit s) / 16, in [1, 2): the 1 is taken off once per 16 weights.
float nib(uint q, uint s) { return uintBitsToFloat((((q >> s) & 15u) << 19) | 0x3F800000u); }
// 2^23 + (signed byte of q at bit s) + 128.
float sbyte(uint q, uint s) { return uintBitsToFloat((((q >> s) & 255u) ^ 128u) | 0x4B000000u); }
uint w32(uint hw) { return uint(wu16[hw]) | (uint(wu16[hw + 1u]) << 16); }
// Bytes [a, a + 16) and [a, a + 8) of W for an even a, with 32-bit loads: a run starting 2 bytes
// into a word takes one word more, shifted by 16 bits. Fewer, wider loads than 16-bit ones: the
// L1 cache's cost is per load instruction and 128-byte line touched, not per byte.
uvec4 bytes16(uint a) {
  const uint i = a >> 2;
  const bool mid = (a & 2u) != 0u;
  const uint w0 = wu32[i], w1 = wu32[i + 1u], w2 = wu32[i + 2u], w3 = wu32[i + 3u];
  const uint w4 = mid ? wu32[i + 4u] : 0u;
  return mid ? uvec4((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16), (w2 >> 16) | (w3 << 16), (w3 >> 16) | (w4 << 16))
             : uvec4(w0, w1, w2, w3);
}
uvec2 bytes8(uint a) {
  const uint i = a >> 2;
  const bool mid = (a & 2u) != 0u;
  const uint w0 = wu32[i], w1 = wu32[i + 1u];
  const uint w2 = mid ? wu32[i + 2u] : 0u;
  return mid ? uvec2((w0 >> 16) | (w1 << 16), (w1 >> 16) | (w2 << 16)) : uvec2(w0, w1);
}

void main() {
  const uint row0 = flat_group() * RS;
  if (row0 >= pc.N) return;
  const uint t = gl_LocalInvocationID.x;
  [[unroll]] for (uint i = 0; i < NA; ++i) acc[i] = 0.0;
  uint rows[RS];
  [[unroll]] for (uint r = 0; r < RS; ++r) rows[r] = min(row0 + r, pc.N - 1u);

  if (is_quant(DT_W)) {
    // Work item: half a block (16 weights), so two neighbouring invocations share a block and a
    // warp reads 16 consecutive blocks.
    const uint BB = DT_W == DT_Q8_0 ? 34u : DT_W == DT_Q4_0 ? 18u : 20u;
    const uint nblk = pc.K / 32u;
    const uint nitems = nblk * 2u;
    for (uint i0 = t; i0 < nitems; i0 += U * WG) {
      uint dm[U * RS];
      uvec4 q[U * RS];
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint it = i0 + u * WG, blk = it >> 1, h = it & 1u;
        if (it >= nitems) break;
        [[unroll]] for (uint r = 0; r < RS; ++r) {
          const uint bb = pc.off_w + (rows[r] * nblk + blk) * BB;
          const uint hw = bb >> 1;
          const uint s = u * RS + r;
          if (DT_W == DT_Q8_0) {
            dm[s] = uint(wu16[hw]);
            q[s] = bytes16(bb + 2u + 16u * h);
          } else if (DT_W == DT_Q4_0) {
            dm[s] = uint(wu16[hw]);
            q[s] = uvec4(bytes8(bb + 2u + 8u * h), 0u, 0u);
          } else if (A4 == 1) {
            const uint w = bb >> 2;
            dm[s] = wu32[w];
            q[s] = uvec4(wu32[w + 1u + 2u * h], wu32[w + 2u + 2u * h], 0u, 0u);
          } else {
            dm[s] = w32(hw);
            q[s] = uvec4(bytes8(bb + 4u + 8u * h), 0u, 0u);
          }
        }
      }
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint it = i0 + u * WG, blk = it >> 1, h = it & 1u;
        if (it >= nitems) break;
        // Elements of this half: q8_0 holds 16 consecutive ones; q4 bytes hold element j in the
        // low nibble and j + 16 in the high one, so a half is two runs of 8.
        const uint k0 = blk * 32u + (DT_W == DT_Q8_0 ? 16u * h : 8u * h);
        const uint k1 = DT_W == DT_Q8_0 ? k0 + 8u : k0 + 16u;
        [[unroll]] for (uint m = 0; m < MX; ++m) {
          float xa[8], xb[8];
          load_xr8(m, k0, xa);
          load_xr8(m, k1, xb);
          float xsum = 0.0;
          if (DT_W != DT_Q8_0)
            [[unroll]] for (uint j = 0; j < 8u; ++j) xsum += xa[j] + xb[j];
          [[unroll]] for (uint r = 0; r < RS; ++r) {
            const uint s = u * RS + r;
            float sum = 0.0;
            if (DT_W == DT_Q8_0) {
              [[unroll]] for (uint j = 0; j < 4u; ++j) {
                sum += (sbyte(q[s].x, 8u * j) - 8388736.0) * xa[j];
                sum += (sbyte(q[s].y, 8u * j) - 8388736.0) * xa[4u + j];
                sum += (sbyte(q[s].z, 8u * j) - 8388736.0) * xb[j];
                sum += (sbyte(q[s].w, 8u * j) - 8388736.0) * xb[4u + j];
              }
            } else {
              [[unroll]] for (uint j = 0; j < 4u; ++j) {
                sum += nib(q[s].x, 8u * j) * xa[j];
                sum += nib(q[s].y, 8u * j) * xa[4u + j];
                sum += nib(q[s].x, 8u * j + 4u) * xb[j];
                sum += nib(q[s].y, 8u * j + 4u) * xb[4u + j];
              }
              // sum = sum (1 + q / 16) x: q4_0 values are (q - 8) d, q4_1 values q d + m.
              sum = 16.0 * sum - (DT_W == DT_Q4_0 ? 24.0 : 16.0) * xsum;
            }
            const vec2 d = unpackHalf2x16(dm[s]);
            float v = d.x * sum;
            if (DT_W == DT_Q4_1) v += d.y * xsum;
            acc[r * MX + m] += v;
          }
        }
      }
    }
  } else if (WVEC == 1) {
    const uint nitems = pc.K / 8u;
    for (uint i0 = t; i0 < nitems; i0 += U * WG) {
      uvec4 wa[U * RS], wb[U * RS];
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint it = i0 + u * WG;
        if (it >= nitems) break;
        [[unroll]] for (uint r = 0; r < RS; ++r) {
          const uint e = pc.off_w + rows[r] * pc.K + it * 8u;
          if (DT_W == DT_F32) {
            wa[u * RS + r] = wu4[e >> 2];
            wb[u * RS + r] = wu4[(e >> 2) + 1u];
          } else {
            wa[u * RS + r] = wu4[e >> 3];
          }
        }
      }
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint it = i0 + u * WG;
        if (it >= nitems) break;
        float w[RS][8];
        [[unroll]] for (uint r = 0; r < RS; ++r) {
          const uint s = u * RS + r;
          if (DT_W == DT_F32) {
            w[r][0] = uintBitsToFloat(wa[s].x); w[r][1] = uintBitsToFloat(wa[s].y);
            w[r][2] = uintBitsToFloat(wa[s].z); w[r][3] = uintBitsToFloat(wa[s].w);
            w[r][4] = uintBitsToFloat(wb[s].x); w[r][5] = uintBitsToFloat(wb[s].y);
            w[r][6] = uintBitsToFloat(wb[s].z); w[r][7] = uintBitsToFloat(wb[s].w);
          } else {
            unpack8(wa[s], w[r]);
          }
        }
        [[unroll]] for (uint m = 0; m < MX; ++m) {
          float xv[8];
          load_xr8(m, it * 8u, xv);
          [[unroll]] for (uint r = 0; r < RS; ++r) {
            float sum = 0.0;
            [[unroll]] for (uint j = 0; j < 8u; ++j) sum += w[r][j] * xv[j];
            acc[r * MX + m] += sum;
          }
        }
      }
    }
  } else {
    // Any K and alignment: one element per invocation per step, still coalesced across a warp.
    for (uint k = t; k < pc.K; k += WG) {
      float w[RS];
      [[unroll]] for (uint r = 0; r < RS; ++r) w[r] = load2(DT_W, pc.off_w + rows[r] * pc.K + k);
      [[unroll]] for (uint m = 0; m < MX; ++m) {
        const float xv = load_xr1(m, k);
        [[unroll]] for (uint r = 0; r < RS; ++r) acc[r * MX + m] += w[r] * xv;
      }
    }
  }

#ifdef MATVEC_SHARED_REDUCE
  [[unroll]] for (uint i = 0; i < NA; ++i) red[i * WG + t] = acc[i];
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (t < s)
      [[unroll]] for (uint i = 0; i < NA; ++i) red[i * WG + t] += red[i * WG + t + s];
    barrier();
  }
  const uint parts = 1u;
#else
  [[unroll]] for (uint i = 0; i < NA; ++i) {
    const float s = subgroupAdd(acc[i]);
    if (subgroupElect()) red[i * WG + gl_SubgroupID] = s;
  }
  barrier();
  const uint parts = gl_NumSubgroups;
#endif
  for (uint i = t; i < RS * MR; i += WG) {
    const uint r = i / MR, m = i % MR, n = row0 + r;
    if (n >= pc.N) continue;
    float dot = 0.0;
    for (uint p = 0; p < parts; ++p) dot += red[(r * MX + m) * WG + p];
    if (NORM != 0u) {
      float s1 = 0.0, s2 = 0.0;
      for (uint p = 0; p < parts; ++p) {
        if (NORM == 1u) s1 += red[(NACC + m) * WG + p];
        s2 += red[(SQ + m) * WG + p];
      }
      const float inv_k = 1.0 / float(pc.K);
      if (NORM == 2u) {
        dot *= inversesqrt(s2 * inv_k + pc.eps);
      } else {
        const float mean = s1 * inv_k, var = max(s2 * inv_k - mean * mean, 0.0);
        float wg = 0.0, wb = 0.0;
        for (uint p = 0; p < parts; ++p) {
          wg += red[(r * MX + MR) * WG + p];
          wb += red[(r * MX + MR + 1u) * WG + p];
        }
        dot = (dot - mean * wg) * inversesqrt(var + pc.eps) + wb;
      }
    }
    float v = DT_BIAS != DT_NONE ? load3(DT_BIAS, pc.off_b + n) : 0.0;
    v += dot;
    // After the bias, as a separate add of the projection would round.
    v = apply_act(ACT, v);
    if (DT_RES != DT_NONE) v += load4(DT_RES, pc.off_r + m * pc.r_sm + n);
    store0(DT_Y, pc.off_y + m * pc.N + n, v);
  }
}
