#version 450
// One LSTM time step (torch gate order i, f, g, o): gates = gx[b, t] + h_prev . w_hh^T, then
// c = f * c + i * g and h = o * tanh(c). One workgroup per (batch row b, hidden unit j): the four
// gate rows of unit j are the only ones its cell update needs, so no workgroup waits on another
// within a step, and the invocations split the four dot products over the hidden size.
// Bindings: 0 y (f32 [B, T, H]: h_t is written at t, h_{t-1} read from t - 1), 1 gx (f32
// [B, T, 4H], the input projection with its biases), 2 w_hh [4H, H], 3 h0 [B, H] (read at t = 0),
// 4 c (f32 [B, H], the cell state, updated in place), 5 c0 [B, H] (the cell state read at t = 0),
// 6 h (the op's final hidden state [B, H] in its own dtype, written at t = T - 1), so that no
// copy has to start the recurrence or take its last row.
#include "common.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint DT_W = 0;
layout(constant_id = 1) const uint DT_H0 = 0;
layout(constant_id = 2) const uint DT_C0 = 0;
layout(constant_id = 3) const uint DT_H = 0;

BINDING(5)
BINDING(6)

layout(push_constant) uniform Push {
  uint B, T, H, t;
  uint off_y, off_gx, off_w, off_h0, off_c, off_c0, off_h;
} pc;

const uint WG = 64;
shared vec4 red[WG];

float sigmoid_(float v) { return 1.0 / (1.0 + exp(-v)); }
// exp of -2|v| never overflows, where the textbook (e^v - e^-v) / (e^v + e^-v) gives inf / inf.
float tanh_(float v) {
  float e = exp(-2.0 * abs(v));
  float r = (1.0 - e) / (1.0 + e);
  return v < 0.0 ? -r : r;
}

void main() {
  uint g = flat_group();
  if (g >= pc.B * pc.H) return;
  uint b = g / pc.H, j = g % pc.H, l = gl_LocalInvocationID.x;
  uint H = pc.H;
  vec4 s = vec4(0.0);
  uint prev = pc.off_y + (b * pc.T + pc.t - 1u) * H;  // used only when t > 0
  uint w0 = pc.off_w + j * H;
  for (uint k = l; k < H; k += WG) {
    float hv = pc.t == 0u ? load3(DT_H0, pc.off_h0 + b * H + k) : b0_f32[prev + k];
    s.x += hv * load2(DT_W, w0 + k);
    s.y += hv * load2(DT_W, w0 + H * H + k);
    s.z += hv * load2(DT_W, w0 + 2u * H * H + k);
    s.w += hv * load2(DT_W, w0 + 3u * H * H + k);
  }
  red[l] = s;
  barrier();
  for (uint st = WG / 2u; st > 0u; st >>= 1) {
    if (l < st) red[l] += red[l + st];
    barrier();
  }
  if (l != 0u) return;
  uint gxo = pc.off_gx + (b * pc.T + pc.t) * 4u * H + j;
  vec4 gt = red[0] + vec4(b1_f32[gxo], b1_f32[gxo + H], b1_f32[gxo + 2u * H], b1_f32[gxo + 3u * H]);
  uint co = pc.off_c + b * H + j;
  float c_prev = pc.t == 0u ? load5(DT_C0, pc.off_c0 + b * H + j) : b4_f32[co];
  float c = sigmoid_(gt.y) * c_prev + sigmoid_(gt.x) * tanh_(gt.z);
  b4_f32[co] = c;
  float h = sigmoid_(gt.w) * tanh_(c);
  b0_f32[pc.off_y + (b * pc.T + pc.t) * H + j] = h;
  if (pc.t + 1u == pc.T) store6(DT_H, pc.off_h + b * H + j, h);
}
