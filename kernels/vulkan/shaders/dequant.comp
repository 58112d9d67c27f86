#version 450
// Block-quantised W [N, K] (GGUF blocks of 32 elements along K: q8_0, q4_0, q4_1) expanded to f16
// rows, for prefill projections that then run on the f16 tensor-core kernels (ops_linalg.cpp;
// matmul_tiles.cpp, dequant_first). Each invocation writes 8 halves (16 bytes) of one block:
// d * q (+ m) computed in f32 and rounded to a half, as the block-quantised kernels' loads round
// them.
// Bindings: 0 y (f16, 8-element aligned), 1 W (byte offset even: every block field is 16-bit).
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_W = DT_Q4_0;

layout(push_constant) uniform Push {
  uint n8;    // 8-element groups: N * K / 8
  uint off_y; // halves
  uint off_w; // bytes
} pc;

layout(set = 0, binding = 0, std430) writeonly buffer Y4 { uvec4 y4[]; };

void main() {
  const uint i = flat_invocation();
  if (i >= pc.n8) return;
  const uint blk = i >> 2u, part = i & 3u;  // elements part * 8 .. + 7 of block blk
  const uint bytes = DT_W == DT_Q8_0 ? 34u : DT_W == DT_Q4_0 ? 18u : 20u;
  const uint h = (pc.off_w + blk * bytes) >> 1u;  // the block's first 16-bit word
  const float d = unpackHalf2x16(uint(b1_u16[h])).x;
  const float m = DT_W == DT_Q4_1 ? unpackHalf2x16(uint(b1_u16[h + 1u])).x : 0.0;
  float v[8];
  if (DT_W == DT_Q8_0) {
    // Element j is signed byte j after the scale: words 1 + part * 4 .. + 3 hold elements part * 8 ..
    [[unroll]] for (uint w = 0; w < 4u; ++w) {
      const uint x = uint(b1_u16[h + 1u + part * 4u + w]);
      v[2u * w] = float(int(x << 24u) >> 24);
      v[2u * w + 1u] = float(int(x << 16u) >> 24);
    }
  } else {
    // Element j is the low nibble of quant byte j % 16 for j < 16, the high one past: parts 0 and
    // 1 are the low nibbles of bytes 0-7 and 8-15, parts 2 and 3 their high nibbles.
    const uint q0 = h + (DT_W == DT_Q4_1 ? 2u : 1u) + (part & 1u) * 4u, sh = (part >> 1u) * 4u;
    [[unroll]] for (uint w = 0; w < 4u; ++w) {
      const uint x = uint(b1_u16[q0 + w]);
      v[2u * w] = float((x >> sh) & 15u);
      v[2u * w + 1u] = float((x >> (8u + sh)) & 15u);
    }
  }
  const float off = DT_W == DT_Q4_0 ? -8.0 : 0.0;
  uvec4 o;
  [[unroll]] for (uint w = 0; w < 4u; ++w)
    o[w] = packHalf2x16(vec2(d * (v[2u * w] + off) + m, d * (v[2u * w + 1u] + off) + m));
  y4[(pc.off_y >> 3u) + i] = o;
}
