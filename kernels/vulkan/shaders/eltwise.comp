#version 450
// Generic strided elementwise kernel: unary, binary (broadcast through 0 strides), where, cast and
// copy. The host collapses dims to at most 5 and pads with size-1 dims; y may be strided too
// (slice_update and concat write into sub-views).
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint OP = 0;
layout(constant_id = 1) const uint DT_A = 0;
layout(constant_id = 2) const uint DT_B = 0;
layout(constant_id = 3) const uint DT_C = 0;
layout(constant_id = 4) const uint DT_Y = 0;
layout(constant_id = 5) const uint RANK = 5;
// Bytes per element for a bit-exact copy (OP_COPY with equal dtypes); 0 otherwise.
layout(constant_id = 6) const uint RAW_BYTES = 0;
// 1: a copy into y at a position held on the device (slice_update's offset): binding 2 holds an
// i32 index, clamped to [0, p1's bits] and times p0's bits elements of y added to y's offset.
layout(constant_id = 7) const uint DYN_Y = 0;

layout(push_constant) uniform Push {
  uint n;
  uint shape[5];
  int sy[5];
  int sa[5];
  int sb[5];
  int sc[5];
  uint off_y, off_a, off_b, off_c;
  float p0, p1;
} pc;

// Operation codes, shared with the host code.
#include "eltwise_ops.h"

float sigmoid(float x) { return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

float tanh_safe(float x) {
  // GLSL tanh overflows to nan for large |x| on some drivers.
  if (abs(x) > 15.0) return sign(x);
  return tanh(x);
}

float unary(float x) {
  switch (OP) {
    case OP_NEG: return -x;
    case OP_ABS: return abs(x);
    case OP_EXP: return exp(x);
    case OP_LOG: return log(x);
    case OP_SQRT: return sqrt(x);
    case OP_RSQRT: return inversesqrt(x);
    case OP_RECIP: return 1.0 / x;
    case OP_SQUARE: return x * x;
    case OP_SIN: return sin(x);
    case OP_COS: return cos(x);
    case OP_TANH: return tanh_safe(x);
    case OP_ERF: return erf_approx(x);
    case OP_SIGMOID: return sigmoid(x);
    case OP_RELU: return max(x, 0.0);
    case OP_SILU: return x * sigmoid(x);
    case OP_SOFTPLUS: return x > 20.0 ? x : log(1.0 + exp(x));
    case OP_GELU: return gelu_erf(x);
    case OP_GELU_TANH: return 0.5 * x * (1.0 + tanh_safe(0.79788456080286536 * (x + 0.044715 * x * x * x)));
    case OP_CLAMP: return min(max(x, pc.p0), pc.p1);
    case OP_SCALE: return x * pc.p0 + pc.p1;
    case OP_POW_SCALAR: return pow(x, pc.p0);
    default: return x;
  }
}

float binary(float a, float b) {
  switch (OP) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_MAX: return max(a, b);
    case OP_MIN: return min(a, b);
    case OP_POW: return pow(a, b);
    case OP_EQ: return a == b ? 1.0 : 0.0;
    case OP_LT: return a < b ? 1.0 : 0.0;
    case OP_GT: return a > b ? 1.0 : 0.0;
    case OP_GLU: return a * sigmoid(b);
    case OP_GLU_SILU: return a * (b * sigmoid(b));
    default: return 0.0;
  }
}

void main() {
  uint idx = flat_invocation();
  if (idx >= pc.n) return;
  int oy = int(pc.off_y), oa = int(pc.off_a), ob = int(pc.off_b), oc = int(pc.off_c);
  uint rest = idx;
  for (int d = int(RANK) - 1; d >= 0; --d) {
    uint c = rest % pc.shape[d];
    rest /= pc.shape[d];
    oy += int(c) * pc.sy[d];
    oa += int(c) * pc.sa[d];
    ob += int(c) * pc.sb[d];
    oc += int(c) * pc.sc[d];
  }
  // The index at this element's place in b (one for all: b's strides are 0; one per row of a
  // scatter: b steps along that axis).
  if (DYN_Y == 1) oy += clamp(b2_i32[ob], 0, floatBitsToInt(pc.p1)) * floatBitsToInt(pc.p0);
  if (RAW_BYTES == 4) { b0_u32[oy] = b1_u32[oa]; return; }
  if (RAW_BYTES == 2) { b0_u16[oy] = b1_u16[oa]; return; }
  if (RAW_BYTES == 1) { b0_u8[oy] = b1_u8[oa]; return; }
  if (RAW_BYTES == 8) { b0_u32[2 * oy] = b1_u32[2 * oa]; b0_u32[2 * oy + 1] = b1_u32[2 * oa + 1]; return; }
  float a = load1(DT_A, uint(oa));
  float y;
  if (OP == OP_WHERE) {
    // a = cond, b and c are the two branches
    y = a != 0.0 ? load2(DT_B, uint(ob)) : load3(DT_C, uint(oc));
  } else if (OP >= OP_ADD) {
    y = binary(a, load2(DT_B, uint(ob)));
  } else {
    y = unary(a);
  }
  store0(DT_Y, uint(oy), y);
}
