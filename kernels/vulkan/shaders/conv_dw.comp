#version 450
#extension GL_EXT_control_flow_attributes : require
// Depthwise conv1d (groups = in = out channels, stride 1, dilation 1, K <= KMAX taps): one
// workgroup per (batch, channel, tile of TILE outputs). The tile's inputs (with the K - 1 halo)
// are read from memory once, coalesced, into shared memory; each invocation then computes P
// consecutive outputs from a register window that serves KB taps per refill, so every input
// read from shared memory feeds several multiply-adds (the direct kernel reads K inputs from
// memory per output). Outputs go back through shared memory to leave as coalesced stores.
// Bindings: 0 y, 1 x, 2 w [C, 1, K], 3 bias.
#include "common.glsl"

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint DT_W = 0;
layout(constant_id = 2) const uint DT_B = DT_NONE;
layout(constant_id = 3) const uint DT_Y = 0;
// Outputs per invocation, 8 or 16: 16 for long rows, where a workgroup's larger tile keeps more
// loads in flight per core (a workgroup waits for its whole tile before computing).
layout(constant_id = 4) const uint P = 8;

const uint WG = 128;
const uint TILE = WG * P;
const uint KB = 8;  // taps per register window
const uint KMAX = 128;
// Logical float f lives in vec4 slot f / 4 plus one spare slot every 8: invocation i reads slots
// from P / 4 * i on, and without the spare slots the 8 lanes of a 16-byte load phase would
// share banks.
const uint NX4 = (TILE + KMAX) / 4u;
shared vec4 xs[NX4 + NX4 / 8u + 1u];
shared vec4 ws[KMAX / 4u];

layout(push_constant) uniform Push {
  uint B, C, T, To, K, pad, ntiles;
  uint x_sb, x_sc, x_sw;
  uint off_y, off_x, off_w, off_b;
} pc;

uint slot(uint v) { return v + (v >> 3); }

void main() {
  const uint g = flat_group();
  const uint tile = g % pc.ntiles, bc = g / pc.ntiles;
  const uint c = bc % pc.C, b = bc / pc.C;
  if (b >= pc.B) return;  // the 2-D grid's spare groups
  const uint t = gl_LocalInvocationID.x;
  const uint t0 = tile * TILE;
  const uint kpad = (pc.K + KB - 1u) / KB * KB;

  for (uint i = t; i < kpad; i += WG) ws[i >> 2][i & 3u] = i < pc.K ? load2(DT_W, pc.off_w + c * pc.K + i) : 0.0;

  // Inputs t0 - pad + i for i < TILE + kpad; zero outside [0, T) (the padding).
  const uint nin = TILE + kpad;
  const int first = int(t0) - int(pc.pad);
  const uint xrow = pc.off_x + b * pc.x_sb + c * pc.x_sc;
  const uint LOADS = (TILE + KMAX + WG - 1u) / WG;
  float v[LOADS];
  [[unroll]] for (uint l = 0; l < LOADS; ++l) {
    const uint i = t + l * WG;
    const int p = first + int(i);
    v[l] = i < nin && p >= 0 && p < int(pc.T) ? load1(DT_X, xrow + uint(p) * pc.x_sw) : 0.0;
  }
  [[unroll]] for (uint l = 0; l < LOADS; ++l) {
    const uint i = t + l * WG;
    if (i < nin) xs[slot(i >> 2)][i & 3u] = v[l];
  }
  barrier();

  const float bias = DT_B != DT_NONE ? load3(DT_B, pc.off_b + c) : 0.0;
  float acc[P];
  [[unroll]] for (uint p = 0; p < P; ++p) acc[p] = bias;
  const uint NW = (P + KB + 2u) / 4u;  // vec4 slots a window spans
  for (uint kc = 0; kc < kpad; kc += KB) {
    const uint s0 = P / 4u * t + kc / 4u;
    float win[NW * 4u];
    [[unroll]] for (uint j = 0; j < NW; ++j) {
      const vec4 q = xs[slot(s0 + j)];
      win[4u * j] = q.x; win[4u * j + 1u] = q.y; win[4u * j + 2u] = q.z; win[4u * j + 3u] = q.w;
    }
    const vec4 wa = ws[kc / 4u], wb = ws[kc / 4u + 1u];
    const float wk[KB] = float[KB](wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w);
    [[unroll]] for (uint k = 0; k < KB; ++k)
      [[unroll]] for (uint p = 0; p < P; ++p) acc[p] += wk[k] * win[p + k];
  }
  barrier();
  for (uint j = 0; j < P / 4u; ++j)
    xs[slot(P / 4u * t + j)] = vec4(acc[4u * j], acc[4u * j + 1u], acc[4u * j + 2u], acc[4u * j + 3u]);
  barrier();
  const uint nout = min(TILE, pc.To - t0);
  const uint yrow = pc.off_y + (b * pc.C + c) * pc.To + t0;
  [[unroll]] for (uint l = 0; l < P; ++l) {
    const uint i = t + l * WG;
    if (i < nout) store0(DT_Y, yrow + i, xs[slot(i >> 2)][i & 3u]);
  }
}
