#version 450
// Embedding gather: y[r, :] = table[ids[r], :] for any table dtype, block-quantised included.
// An id outside [0, V) gives a zero row (a kernel cannot raise an error mid-method).
// Bindings: 0 y, 1 table, 2 ids.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_T = 0;
layout(constant_id = 1) const uint DT_I = DT_I32;
layout(constant_id = 2) const uint DT_Y = 0;

layout(push_constant) uniform Push {
  uint n, D, V;
  uint off_y, off_t, off_i;  // off_t in bytes for block-quantised tables
} pc;

void main() {
  uint idx = flat_invocation();
  if (idx >= pc.n) return;
  uint r = idx / pc.D, d = idx % pc.D;
  int id = DT_I == DT_I64 ? b2_i32[2 * (pc.off_i + r)] : b2_i32[pc.off_i + r];
  if (DT_I == DT_I64 && b2_i32[2 * (pc.off_i + r) + 1] != 0) id = -1;
  float v = 0.0;
  if (id >= 0 && uint(id) < pc.V) {
    if (is_quant(DT_T)) {
      uint blk_bytes = DT_T == DT_Q8_0 ? 34u : DT_T == DT_Q4_0 ? 18u : 20u;
      v = loadq1(DT_T, pc.off_t + uint(id) * (pc.D / 32u) * blk_bytes, d >> 5, d & 31u);
    } else {
      v = load1(DT_T, pc.off_t + uint(id) * pc.D + d);
    }
  }
  store0(DT_Y, pc.off_y + idx, v);
}
