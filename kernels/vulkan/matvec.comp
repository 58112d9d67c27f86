#version 450
// linear for few rows (decode): y[m, n] = sum_k x[m, k] * W[n, k] + bias[n], m < M <= 8. One
// workgroup per output column n reads W's row once for all M rows; weights may be block-quantised.
// Bindings: 0 y, 1 x, 2 weight, 3 bias.
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint DT_W = 0;
layout(constant_id = 2) const uint DT_Y = 0;
layout(constant_id = 3) const uint DT_BIAS = DT_NONE;
// 1: f16 weight rows start 16-byte aligned (K % 8 == 0), read 8 halves per 16-byte load; scalar
// 2-byte loads leave most of the memory bandwidth unused.
layout(constant_id = 4) const uint VEC8 = 0;
layout(set = 0, binding = 2, std430) buffer BufW4 { uvec4 w4[]; };

layout(push_constant) uniform Push {
  uint M, N, K;
  uint x_sm, x_sk;
  uint off_y, off_x, off_w, off_b;  // elements; off_w is in bytes for block-quantised weights
} pc;

const uint WG = 128;
const uint MAXM = 8;
shared float red[MAXM][WG];

void main() {
  uint n = flat_group();
  if (n >= pc.N) return;
  uint t = gl_LocalInvocationID.x;
  float acc[MAXM];
  for (uint m = 0; m < MAXM; ++m) acc[m] = 0.0;

  if (is_quant(DT_W)) {
    // One block per invocation per step, read as 16-bit words (blocks are 2-byte aligned);
    // byte loads would cost twice the instructions for the same bytes.
    uint nblk = pc.K / 32u;
    uint bb = DT_W == DT_Q8_0 ? 34u : DT_W == DT_Q4_0 ? 18u : 20u;
    uint base = pc.off_w + n * nblk * bb;
    for (uint blk = t; blk < nblk; blk += WG) {
      uint h = (base + blk * bb) >> 1;
      float d = unpackHalf2x16(uint(b2_u16[h])).x;
      float w[32];
      if (DT_W == DT_Q8_0) {
        for (uint j = 0; j < 16u; ++j) {
          uint v = uint(b2_u16[h + 1u + j]);
          w[2u * j] = d * float(int(v << 24) >> 24);
          w[2u * j + 1u] = d * float(int(v << 16) >> 24);
        }
      } else {
        // q4_0: (q - 8) d; q4_1: q d + m. Byte i holds element i (low nibble) and i + 16 (high).
        float mn = DT_W == DT_Q4_1 ? unpackHalf2x16(uint(b2_u16[h + 1u])).x : -8.0 * d;
        uint q0 = DT_W == DT_Q4_1 ? 2u : 1u;
        for (uint j = 0; j < 8u; ++j) {
          uint v = uint(b2_u16[h + q0 + j]);
          w[2u * j] = float(v & 15u) * d + mn;
          w[2u * j + 16u] = float((v >> 4) & 15u) * d + mn;
          w[2u * j + 1u] = float((v >> 8) & 15u) * d + mn;
          w[2u * j + 17u] = float((v >> 12) & 15u) * d + mn;
        }
      }
      for (uint m = 0; m < pc.M; ++m) {
        uint xo = pc.off_x + m * pc.x_sm + blk * 32u * pc.x_sk;
        float s = 0.0;
        for (uint j = 0; j < 32u; ++j) s += w[j] * load1(DT_X, xo + j * pc.x_sk);
        acc[m] += s;
      }
    }
  } else if (VEC8 == 1) {
    uint wrow8 = (pc.off_w + n * pc.K) / 8u;
    for (uint k8 = t; k8 < pc.K / 8u; k8 += WG) {
      uvec4 p = w4[wrow8 + k8];
      float w[8];
      vec2 h;
      h = unpackHalf2x16(p.x); w[0] = h.x; w[1] = h.y;
      h = unpackHalf2x16(p.y); w[2] = h.x; w[3] = h.y;
      h = unpackHalf2x16(p.z); w[4] = h.x; w[5] = h.y;
      h = unpackHalf2x16(p.w); w[6] = h.x; w[7] = h.y;
      for (uint m = 0; m < pc.M; ++m) {
        uint xo = pc.off_x + m * pc.x_sm + k8 * 8u * pc.x_sk;
        float s = 0.0;
        for (uint j = 0; j < 8u; ++j) s += w[j] * load1(DT_X, xo + j * pc.x_sk);
        acc[m] += s;
      }
    }
  } else {
    uint wrow = pc.off_w + n * pc.K;
    for (uint k = t; k < pc.K; k += WG) {
      float w = load2(DT_W, wrow + k);
      for (uint m = 0; m < pc.M; ++m) acc[m] += w * load1(DT_X, pc.off_x + m * pc.x_sm + k * pc.x_sk);
    }
  }
  for (uint m = 0; m < pc.M; ++m) red[m][t] = acc[m];
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (t < s)
      for (uint m = 0; m < pc.M; ++m) red[m][t] += red[m][t + s];
    barrier();
  }
  if (t < pc.M) {
    float b = DT_BIAS != DT_NONE ? load3(DT_BIAS, pc.off_b + n) : 0.0;
    store0(DT_Y, pc.off_y + t * pc.N + n, red[t][0] + b);
  }
}
