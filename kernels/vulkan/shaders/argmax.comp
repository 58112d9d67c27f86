#version 450
#extension GL_EXT_control_flow_attributes : require
// argmax along one axis of a dense tensor seen as [outer, C, inner] (i32 indices), as the CPU
// kernel and torch.argmax: the first maximum wins, a NaN counts as the maximum (the first NaN).
// A long row (a language model's logits: 128,256 values) is split over P workgroups, each
// reducing a contiguous span to (value, index) in the partials buffer; a second dispatch (STAGE
// 1) reduces each row's P partials in order. With P = 1 stage 0 writes y itself. NAN_FLAG: a row
// whose winner is a NaN gives -1 instead (argmax's nan_flag).
// Bindings: 0 y (i32), 1 x, 2 partials (2 words a part: the value's bits, the index).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint STAGE = 0;
layout(constant_id = 2) const uint NAN_FLAG = 0;

layout(push_constant) uniform Push {
  uint rows, C, inner, P, span;
  uint off_y, off_x;
} pc;

const uint WG = 256;
const uint NONE = 0xffffffffu;
shared float red[WG];
shared uint redi[WG];

// Whether (b, ib) beats (a, ia): unset loses; a NaN beats a number; equal values (or two NaNs)
// go to the lower index.
bool beats(float a, uint ia, float b, uint ib) {
  if (ib == NONE) return false;
  if (ia == NONE) return true;
  const bool na = isnan(a), nb = isnan(b);
  if (na || nb) return nb && (!na || ib < ia);
  return b > a || (b == a && ib < ia);
}

void main() {
  const uint g = flat_group();
  const uint t = gl_LocalInvocationID.x;
  const uint parts = STAGE == 0u ? pc.P : 1u;
  if (g >= pc.rows * parts) return;
  const uint row = g / parts, part = g % parts;
  float m = 0.0;
  uint mi = NONE;
  if (STAGE == 0u) {
    const uint o = row / pc.inner, in_ = row % pc.inner;
    const uint xo = pc.off_x + o * pc.C * pc.inner + in_;
    const uint c0 = part * pc.span, c1 = min(pc.C, c0 + pc.span);
    // Four loads in flight before any comparison; each invocation's indices rise, so a later
    // equal value never replaces an earlier one.
    uint c = c0 + t;
    for (; c + 3u * WG < c1; c += 4u * WG) {
      float v[4];
      [[unroll]] for (uint j = 0; j < 4u; ++j) v[j] = load1(DT_X, xo + (c + j * WG) * pc.inner);
      [[unroll]] for (uint j = 0; j < 4u; ++j)
        if (beats(m, mi, v[j], c + j * WG)) { m = v[j]; mi = c + j * WG; }
    }
    for (; c < c1; c += WG) {
      const float v = load1(DT_X, xo + c * pc.inner);
      if (beats(m, mi, v, c)) { m = v; mi = c; }
    }
  } else {
    for (uint p = t; p < pc.P; p += WG) {
      const uint at = 2u * (row * pc.P + p);
      const float v = uintBitsToFloat(b2_u32[at]);
      const uint i = b2_u32[at + 1u];
      if (beats(m, mi, v, i)) { m = v; mi = i; }
    }
  }
  red[t] = m;
  redi[t] = mi;
  barrier();
  for (uint s = WG / 2u; s > 0u; s >>= 1) {
    if (t < s && beats(red[t], redi[t], red[t + s], redi[t + s])) {
      red[t] = red[t + s];
      redi[t] = redi[t + s];
    }
    barrier();
  }
  if (t != 0u) return;
  if (STAGE == 0u && pc.P > 1u) {
    b2_u32[2u * g] = floatBitsToUint(red[0]);
    b2_u32[2u * g + 1u] = redi[0];
  } else {
    b0_i32[pc.off_y + row] = NAN_FLAG == 1u && isnan(red[0]) ? -1 : int(redi[0]);
  }
}
