#version 450
// rms_norm and layer_norm over the last dim, one workgroup per row, statistics in f32 (mean
// first, then the centred variance, which loses less precision than E[x^2] - E[x]^2). Rows up to
// WG * PER elements are read once into registers with every load in flight together (a decode
// step's rows are latency-bound: one row, one workgroup); longer rows loop over memory.
// Bindings: 0 y, 1 x, 2 weight, 3 bias.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 256) in;
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

const uint WG = 256;
const uint PER = 16;
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
  uint yo = pc.off_y + row * pc.C;
  if (pc.C <= WG * PER) {
    float v[PER];
    float s = 0.0;
    [[unroll]] for (uint i = 0; i < PER; ++i) {
      uint c = t + i * WG;
      v[i] = c < pc.C ? load1(DT_X, xo + c) : 0.0;
      s += v[i];
    }
    float mean = IS_LAYER == 1 ? wg_sum(s) / float(pc.C) : 0.0;
    float ss = 0.0;
    [[unroll]] for (uint i = 0; i < PER; ++i) {
      float d = t + i * WG < pc.C ? v[i] - mean : 0.0;
      ss += d * d;
    }
    float inv = inversesqrt(wg_sum(ss) / float(pc.C) + pc.eps);
    [[unroll]] for (uint i = 0; i < PER; ++i) {
      uint c = t + i * WG;
      if (c >= pc.C) break;
      float r = (v[i] - mean) * inv;
      if (DT_W != DT_NONE) r *= load2(DT_W, pc.off_w + c) + (IS_LAYER == 1 ? 0.0 : pc.unit_offset);
      if (DT_B != DT_NONE) r += load3(DT_B, pc.off_b + c);
      store0(DT_Y, yo + c, r);
    }
    return;
  }
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
  for (uint c = t; c < pc.C; c += WG) {
    float v = (load1(DT_X, xo + c) - mean) * inv;
    if (DT_W != DT_NONE) v *= load2(DT_W, pc.off_w + c) + (IS_LAYER == 1 ? 0.0 : pc.unit_offset);
    if (DT_B != DT_NONE) v += load3(DT_B, pc.off_b + c);
    store0(DT_Y, yo + c, v);
  }
}
