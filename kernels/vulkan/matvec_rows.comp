#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// linear for few rows (decode) with block-quantised weights (q8_0 / q4_0 / q4_1, GGUF layout,
// used in place): y[m, n] = sum_k x[m, k] * W[n, k] + bias[n], m < MR <= 8, on devices with
// subgroup arithmetic. Bindings: 0 y, 1 x, 2 weight, 3 bias.
//
// Each workgroup owns pc.R rows of W; each subgroup takes RG of them at a time, its lanes split
// the row's blocks (a lane reads a whole block as 32-bit words, so its scale once per 32
// weights) and one subgroupAdd per output ends the pass: no barrier between passes. x is staged
// once per workgroup in shared memory as f32, with the sum of each 32-block that the q4 formats
// need, when it fits; the two barriers that costs are why a workgroup covers many rows. Against
// matvec_body.glsl's one-pass kernel on an H100 with warm clocks: q4_0 2048x131072 1880 vs
// 1650 GB/s.
#include "common.glsl"

layout(local_size_x_id = 9) in;
layout(constant_id = 9) const uint WG = 128;

layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint DT_W = 0;
layout(constant_id = 2) const uint DT_Y = 0;
layout(constant_id = 3) const uint DT_BIAS = DT_NONE;
layout(constant_id = 4) const uint MR = 1;
// Rows a subgroup works on at once, and blocks (or 16-byte chunks) per lane and row whose loads
// are issued before any is used.
layout(constant_id = 5) const uint RG = 2;
layout(constant_id = 6) const uint U = 2;
// 1: x rows start 16 bytes aligned (x is read 8 elements at a time from memory).
layout(constant_id = 7) const uint XVEC = 0;
// 1: q4_1 rows start 4 bytes aligned; 0: they start 2 bytes past a 4-byte boundary (20-byte
// blocks keep either for every block).
layout(constant_id = 8) const uint A4 = 0;
// Floats of x kept in shared memory: MR * K for quant weights when that fits, else 0 (x is read
// from memory).
layout(constant_id = 10) const uint XSN = 0;

layout(set = 0, binding = 1, std430) readonly buffer XF4 { vec4 xf4[]; };
layout(set = 0, binding = 1, std430) readonly buffer XU2 { uvec2 xu2[]; };
layout(set = 0, binding = 2, std430) readonly buffer WU32 { uint wu32[]; };

layout(push_constant) uniform Push {
  uint N, K;
  uint x_sm;
  uint off_y, off_x, off_w, off_b;  // elements; off_w is in bytes for block-quantised weights
  uint R;                           // rows of W per workgroup
} pc;

const uint XS = XSN > 0u ? 1u : 0u;
// x as f32, 16 bytes a slot; within each 32-block the slots are permuted by the block's index so
// that lanes reading consecutive blocks hit different banks.
shared vec4 xs[XS == 1u ? XSN / 4u : 1u];
shared float xsb[XS == 1u ? XSN / 32u : 1u];
uint swz(uint s4) { return s4 ^ ((s4 >> 3) & 7u); }

// x[m, 32 b + 4 c .. + 4) of the block b.
vec4 xblk(uint m, uint b, uint c) {
  if (XS == 1u) return xs[m * (pc.K >> 2) + swz(b * 8u + c)];
  const uint xo = pc.off_x + m * pc.x_sm + b * 32u + 4u * c;
  if (XVEC == 1 && DT_X == DT_F32) return xf4[xo >> 2];
  if (XVEC == 1 && DT_X == DT_F16) {
    const uvec2 p = xu2[xo >> 2];
    return vec4(unpackHalf2x16(p.x), unpackHalf2x16(p.y));
  }
  return vec4(load1(DT_X, xo), load1(DT_X, xo + 1u), load1(DT_X, xo + 2u), load1(DT_X, xo + 3u));
}

// Quants turned into floats by placing their bits in a float's mantissa (exact; cheaper than an
// integer-to-float conversion). 1 + (4-bit field of q at bit s) / 16, in [1, 2).
float nib(uint q, uint s) { return uintBitsToFloat((((q >> s) & 15u) << 19) | 0x3F800000u); }
// 2^23 + (signed byte of q at bit s) + 128.
float sbyte(uint q, uint s) { return uintBitsToFloat((((q >> s) & 255u) ^ 128u) | 0x4B000000u); }
uint fun16(uint lo, uint hi) { return (lo >> 16) | (hi << 16); }

// Words of one block as loaded: q4_0 5, q4_1 5 or 6, q8_0 9.
const uint NW = DT_W == DT_Q8_0 ? 9u : (DT_W == DT_Q4_1 && A4 == 0u) ? 6u : 5u;
const uint BB = DT_W == DT_Q8_0 ? 34u : DT_W == DT_Q4_0 ? 18u : 20u;

void main() {
  const uint row0 = flat_group() * pc.R;
  if (row0 >= pc.N) return;
  const uint rend = min(row0 + pc.R, pc.N);
  const uint t = gl_LocalInvocationID.x;

  if (XS == 1u) {
    const uint k4 = pc.K >> 2;
    for (uint e = t; e < MR * k4; e += WG) {
      const uint m = e / k4, s = e - m * k4;
      const uint xo = pc.off_x + m * pc.x_sm + 4u * s;
      xs[m * k4 + swz(s)] = vec4(load1(DT_X, xo), load1(DT_X, xo + 1u), load1(DT_X, xo + 2u), load1(DT_X, xo + 3u));
    }
    barrier();
    const uint nb = pc.K >> 5;
    for (uint e = t; e < MR * nb; e += WG) {
      const uint m = e / nb, b = e - m * nb;
      vec4 a = vec4(0.0);
      [[unroll]] for (uint c = 0; c < 8u; ++c) a += xs[m * k4 + b * 8u + c];
      xsb[e] = (a.x + a.y) + (a.z + a.w);
    }
    barrier();
  }

  const uint S = gl_SubgroupSize, lane = gl_SubgroupInvocationID;
  for (uint rb = row0 + gl_SubgroupID * RG; rb < rend; rb += gl_NumSubgroups * RG) {
    float acc[RG * MR];
    [[unroll]] for (uint i = 0; i < RG * MR; ++i) acc[i] = 0.0;
    uint rows[RG];
    [[unroll]] for (uint r = 0; r < RG; ++r) rows[r] = min(rb + r, pc.N - 1u);

    {
      const uint nb = pc.K >> 5;
      for (uint b0 = lane; b0 < nb; b0 += U * S) {
        uint w[U * RG][9];
        bool mid[U * RG];
        [[unroll]] for (uint u = 0; u < U; ++u) {
          const uint b = b0 + u * S;
          if (b >= nb) break;
          [[unroll]] for (uint r = 0; r < RG; ++r) {
            const uint a = pc.off_w + (rows[r] * nb + b) * BB;
            const uint i = a >> 2;
            mid[u * RG + r] = (a & 2u) != 0u;
            [[unroll]] for (uint j = 0; j < NW; ++j) w[u * RG + r][j] = wu32[i + j];
          }
        }
        [[unroll]] for (uint u = 0; u < U; ++u) {
          const uint b = b0 + u * S;
          if (b >= nb) break;
          [[unroll]] for (uint m = 0; m < MR; ++m) {
            vec4 xv[8];
            [[unroll]] for (uint c = 0; c < 8u; ++c) xv[c] = xblk(m, b, c);
            float xsum;
            if (DT_W != DT_Q8_0) {
              if (XS == 1u) {
                xsum = xsb[m * nb + b];
              } else {
                vec4 a = vec4(0.0);
                [[unroll]] for (uint c = 0; c < 8u; ++c) a += xv[c];
                xsum = (a.x + a.y) + (a.z + a.w);
              }
            }
            [[unroll]] for (uint r = 0; r < RG; ++r) {
              const uint s = u * RG + r;
              const bool md = mid[s];
              uint dm;
              uint q[8];
              if (DT_W == DT_Q4_1) {
                // Scale and min at byte 0, quants at byte 4.
                dm = A4 == 1u ? w[s][0] : fun16(w[s][0], w[s][1]);
                [[unroll]] for (uint j = 0; j < 4u; ++j) q[j] = A4 == 1u ? w[s][j + 1u] : fun16(w[s][j + 1u], w[s][j + 2u]);
              } else {
                // Scale at byte 0, quants at byte 2.
                dm = md ? (w[s][0] >> 16) : (w[s][0] & 0xffffu);
                [[unroll]] for (uint j = 0; j < NW - 1u; ++j) q[j] = md ? w[s][j + 1u] : fun16(w[s][j], w[s][j + 1u]);
              }
              float v;
              if (DT_W == DT_Q8_0) {
                float s0 = 0.0, s1 = 0.0;
                [[unroll]] for (uint j = 0; j < 8u; j += 2u) {
                  s0 += (sbyte(q[j], 0u) - 8388736.0) * xv[j].x;
                  s1 += (sbyte(q[j], 8u) - 8388736.0) * xv[j].y;
                  s0 += (sbyte(q[j], 16u) - 8388736.0) * xv[j].z;
                  s1 += (sbyte(q[j], 24u) - 8388736.0) * xv[j].w;
                  s0 += (sbyte(q[j + 1u], 0u) - 8388736.0) * xv[j + 1u].x;
                  s1 += (sbyte(q[j + 1u], 8u) - 8388736.0) * xv[j + 1u].y;
                  s0 += (sbyte(q[j + 1u], 16u) - 8388736.0) * xv[j + 1u].z;
                  s1 += (sbyte(q[j + 1u], 24u) - 8388736.0) * xv[j + 1u].w;
                }
                v = unpackHalf2x16(dm).x * (s0 + s1);
              } else {
                // Byte j holds element j in its low nibble and j + 16 in its high one.
                float s0 = 0.0, s1 = 0.0;
                [[unroll]] for (uint j = 0; j < 4u; ++j) {
                  s0 += nib(q[j], 0u) * xv[j].x;
                  s0 += nib(q[j], 8u) * xv[j].y;
                  s0 += nib(q[j], 16u) * xv[j].z;
                  s0 += nib(q[j], 24u) * xv[j].w;
                  s1 += nib(q[j], 4u) * xv[4u + j].x;
                  s1 += nib(q[j], 12u) * xv[4u + j].y;
                  s1 += nib(q[j], 20u) * xv[4u + j].z;
                  s1 += nib(q[j], 28u) * xv[4u + j].w;
                }
                // sum (1 + q / 16) x: q4_0 values are (q - 8) d, q4_1 values q d + m.
                const float sum = 16.0 * (s0 + s1) - (DT_W == DT_Q4_0 ? 24.0 : 16.0) * xsum;
                const vec2 d = unpackHalf2x16(dm);
                v = d.x * sum;
                if (DT_W == DT_Q4_1) v += d.y * xsum;
              }
              acc[r * MR + m] += v;
            }
          }
        }
      }
    }

    [[unroll]] for (uint i = 0; i < RG * MR; ++i) {
      const float s = subgroupAdd(acc[i]);
      const uint r = i / MR, m = i % MR, n = rb + r;
      if (lane == 0u && n < rend) {
        const float bv = DT_BIAS != DT_NONE ? load3(DT_BIAS, pc.off_b + n) : 0.0;
        store0(DT_Y, pc.off_y + m * pc.N + n, s + bv);
      }
    }
  }
}
