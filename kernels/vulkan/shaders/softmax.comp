#version 450
// softmax and log_softmax along one axis of a dense tensor seen as [outer, C, inner];
// one workgroup per (outer, inner) row. Bindings: 0 y, 1 x.
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint MODE = 0;  // 0 softmax, 1 log_softmax
layout(constant_id = 1) const uint DT_X = 0;
layout(constant_id = 2) const uint DT_Y = 0;

layout(push_constant) uniform Push {
  uint rows, C, inner;
  uint off_y, off_x;
} pc;

const uint WG = 128;
shared float red[WG];

void main() {
  uint row = flat_group();
  if (row >= pc.rows) return;
  uint t = gl_LocalInvocationID.x;
  uint o = row / pc.inner, in_ = row % pc.inner;
  uint xo = pc.off_x + o * pc.C * pc.inner + in_;
  uint yo = pc.off_y + o * pc.C * pc.inner + in_;

  float m = -1.0 / 0.0;
  for (uint c = t; c < pc.C; c += WG) m = max(m, load1(DT_X, xo + c * pc.inner));
  red[t] = m;
  barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (t < s) red[t] = max(red[t], red[t + s]);
    barrier();
  }
  float mx = red[0];
  barrier();
  float s = 0.0;
  for (uint c = t; c < pc.C; c += WG) s += exp(load1(DT_X, xo + c * pc.inner) - mx);
  red[t] = s;
  barrier();
  for (uint st = WG / 2; st > 0; st >>= 1) {
    if (t < st) red[t] += red[t + st];
    barrier();
  }
  float sum = red[0];
  float lse = log(sum);
  for (uint c = t; c < pc.C; c += WG) {
    float v = load1(DT_X, xo + c * pc.inner) - mx;
    store0(DT_Y, yo + c * pc.inner, MODE == 1 ? v - lse : exp(v) / sum);
  }
}
