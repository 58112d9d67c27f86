#version 450
#extension GL_EXT_control_flow_attributes : require
// Depthwise conv1d (stride 1, dilation 1, K <= KMAX taps) reading a channels-last x (channel
// stride 1, as a [B, T, C] activation permuted to [B, C, T] is): one workgroup per (batch, TC
// channels, TT outputs). conv_dw.comp's one-channel tiles would read such an x with one element
// per 32-byte sector; here a warp's loads cover whole runs of TC channels at consecutive times.
// Each invocation computes P consecutive outputs of one channel from a register window refilled
// every KB taps; the outputs go back through shared memory to leave along time (y is dense
// [B, C, To]). Bindings: 0 y, 1 x, 2 w [C, 1, K], 3 bias.
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint DT_W = 0;
layout(constant_id = 2) const uint DT_B = DT_NONE;
layout(constant_id = 3) const uint DT_Y = 0;

const uint WG = 128;
const uint TC = 16;       // channels per workgroup: 32 bytes of f16 per time step
const uint NTB = WG / TC;  // time blocks per workgroup
const uint P = 16;        // outputs per invocation
const uint TT = NTB * P;  // outputs per channel per workgroup
const uint KB = 8;        // taps per register window
const uint KMAX = 64;
const uint WL = TT + KMAX;
// Window row r (a time step, TC channels) lives at row r + r / P: the spare row every P rows
// puts the two time blocks a warp reads 16 banks apart.
shared float xs[(WL + WL / P + 1u) * TC];
shared float ws[KMAX * TC];  // [tap][channel]: a warp's channels read distinct banks

layout(push_constant) uniform Push {
  uint B, C, T, To, K, pad, ntiles, nctiles;
  uint x_sb, x_sc, x_sw;
  uint off_y, off_x, off_w, off_b;
} pc;

uint xrow(uint r) { return (r + r / P) * TC; }

void main() {
  const uint g = flat_group();
  const uint tile = g % pc.ntiles, rest = g / pc.ntiles;
  const uint c0 = (rest % pc.nctiles) * TC, b = rest / pc.nctiles;
  if (b >= pc.B) return;  // the 2-D grid's spare groups
  const uint t = gl_LocalInvocationID.x;
  const uint t0 = tile * TT;
  const uint kpad = (pc.K + KB - 1u) / KB * KB;

  for (uint i = t; i < kpad * TC; i += WG) {
    const uint k = i / TC, c = c0 + i % TC;
    ws[i] = k < pc.K && c < pc.C ? load2(DT_W, pc.off_w + c * pc.K + k) : 0.0;
  }
  // Inputs at times t0 - pad + r for r < TT + kpad; zero outside [0, T) (the padding).
  const uint nin = (TT + kpad) * TC;
  const int first = int(t0) - int(pc.pad);
  const uint xb = pc.off_x + b * pc.x_sb;
  const uint LOADS = (WL * TC + WG - 1u) / WG;
  float v[LOADS];
  [[unroll]] for (uint l = 0; l < LOADS; ++l) {
    const uint i = t + l * WG, c = c0 + i % TC;
    const int p = first + int(i / TC);
    v[l] = i < nin && p >= 0 && p < int(pc.T) && c < pc.C ? load1(DT_X, xb + c * pc.x_sc + uint(p) * pc.x_sw) : 0.0;
  }
  [[unroll]] for (uint l = 0; l < LOADS; ++l) {
    const uint i = t + l * WG;
    if (i < nin) xs[xrow(i / TC) + i % TC] = v[l];
  }
  barrier();

  const uint ci = t % TC, tb = t / TC;
  const float bias = DT_B != DT_NONE && c0 + ci < pc.C ? load3(DT_B, pc.off_b + c0 + ci) : 0.0;
  float acc[P];
  [[unroll]] for (uint p = 0; p < P; ++p) acc[p] = bias;
  for (uint kc = 0; kc < kpad; kc += KB) {
    float win[P + KB - 1u];
    for (uint j = 0; j < P + KB - 1u; ++j) win[j] = xs[xrow(tb * P + kc + j) + ci];
    float wk[KB];
    [[unroll]] for (uint k = 0; k < KB; ++k) wk[k] = ws[(kc + k) * TC + ci];
    [[unroll]] for (uint k = 0; k < KB; ++k)
      [[unroll]] for (uint p = 0; p < P; ++p) acc[p] += wk[k] * win[p + k];
  }
  barrier();
  // Outputs as [channel][time] with a row stride of TT + 1 (odd: the 16 channels a half-warp
  // writes land in distinct banks).
  [[unroll]] for (uint p = 0; p < P; ++p) xs[ci * (TT + 1u) + tb * P + p] = acc[p];
  barrier();
  for (uint l = 0; l < TC * TT / WG; ++l) {
    const uint i = t + l * WG, cc = i / TT, tt = i % TT;
    if (c0 + cc < pc.C && t0 + tt < pc.To)
      store0(DT_Y, pc.off_y + (b * pc.C + c0 + cc) * pc.To + t0 + tt, xs[cc * (TT + 1u) + tt]);
  }
}
