#version 450
// rms_norm and layer_norm over the last dim, one workgroup per row, statistics in f32 (mean
// first, then the centred variance, which loses less precision than E[x^2] - E[x]^2).
// Bindings: 0 y, 1 x, 2 weight, 3 bias.
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint IS_LAYER = 0;
layout(constant_id = 1) const uint DT_X = 0;
layout(constant_id = 2) const uint DT_W = DT_NONE;
layout(constant_id = 3) const uint DT_B = DT_NONE;
layout(constant_id = 4) const uint DT_Y = 0;

layout(push_constant) uniform Push {
  uint rows, C, x_srow;
  uint off_y, off_x, off_w, off_b;
  float eps, unit_offset;
} pc;

const uint WG = 128;
shared float red[WG];

float wg_sum(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  uint row = flat_group();
  if (row >= pc.rows) return;
  uint t = gl_LocalInvocationID.x;
  uint xo = pc.off_x + row * pc.x_srow;
  float mean = 0.0;
  if (IS_LAYER == 1) {
    float s = 0.0;
    for (uint c = t; c < pc.C; c += WG) s += load1(DT_X, xo + c);
    mean = wg_sum(s) / float(pc.C);
  }
  float ss = 0.0;
  for (uint c = t; c < pc.C; c += WG) {
    float v = load1(DT_X, xo + c) - mean;
    ss += v * v;
  }
  float inv = inversesqrt(wg_sum(ss) / float(pc.C) + pc.eps);
  uint yo = pc.off_y + row * pc.C;
  for (uint c = t; c < pc.C; c += WG) {
    float v = (load1(DT_X, xo + c) - mean) * inv;
    if (DT_W != DT_NONE) v *= load2(DT_W, pc.off_w + c) + (IS_LAYER == 1 ? 0.0 : pc.unit_offset);
    if (DT_B != DT_NONE) v += load3(DT_B, pc.off_b + c);
    store0(DT_Y, yo + c, v);
  }
}
