#version 450
// Rotary embedding on a dense x [..., S, ..., D]; one invocation per output element reads its
// pair partner. Bindings: 0 y, 1 x, 2 inv_freq, 3 offset (i32 [1], added to pos; with DYN = 1;
// DYN = 2: i32 [S], row s at pos + offset[s] instead of pos + s).
// Rows whose index along the head axis (H rows, heads_inner elements apart) is `heads` or more
// (when heads > 0) pass through.
// OUT_AT = 1 (slice_update rotating what it writes): y is a state with cap rows along the seq
// axis and x's extents elsewhere, its rows before the seq axis outer_stride elements apart (cap
// rows' worth when it is dense); x's row s goes to row pos + s there, and rotates at that
// position. The device offset is clamped to max_off so the rows stay inside the state.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint INTERLEAVED = 0;
layout(constant_id = 1) const uint DT_X = 0;
layout(constant_id = 2) const uint DT_F = 0;
layout(constant_id = 3) const uint DT_Y = 0;
layout(constant_id = 4) const uint DYN = 0;
layout(constant_id = 5) const uint OUT_AT = 0;

layout(push_constant) uniform Push {
  uint n, D, S, seq_inner, rd, pos;
  uint off_y, off_x, off_f;
  uint H, heads;  // extent of the head axis; rows rotated along it (0: all)
  uint off_o;
  uint heads_inner;  // elements between consecutive rows of the head axis
  uint cap, max_off;  // OUT_AT: the state's rows along the seq axis; the largest offset
  uint outer_stride;  // OUT_AT: elements between the state's rows before the seq axis
} pc;

void main() {
  uint idx = flat_invocation();
  if (idx >= pc.n) return;
  uint d = idx % pc.D;
  uint s = (idx / pc.seq_inner) % pc.S;
  uint xo = pc.off_x + idx;
  uint pos = pc.pos, row = s;
  if (DYN == 1) {
    int o = b3_i32[pc.off_o];
    pos += OUT_AT == 1 ? min(uint(max(o, 0)), pc.max_off) : uint(o);
  } else if (DYN == 2) {
    pos += uint(b3_i32[pc.off_o + s]);
    row = 0u;
  }
  float x = load1(DT_X, xo);
  float y = x;
  if (d < pc.rd && (pc.heads == 0u || (idx / pc.heads_inner) % pc.H < pc.heads)) {
    uint half_ = pc.rd / 2u;
    uint f;
    float partner, sgn;
    if (INTERLEAVED == 1) {
      f = d / 2u;
      bool even = (d & 1u) == 0u;
      partner = load1(DT_X, even ? xo + 1u : xo - 1u);
      sgn = even ? -1.0 : 1.0;
    } else {
      bool lo = d < half_;
      f = lo ? d : d - half_;
      partner = load1(DT_X, lo ? xo + half_ : xo - half_);
      sgn = lo ? -1.0 : 1.0;
    }
    float ang = float(pos + row) * load2(DT_F, pc.off_f + f);
    const vec2 cs = cos_sin(ang);
    y = x * cs.x + sgn * partner * cs.y;
  }
  uint yo = idx;
  if (OUT_AT == 1) {
    uint outer = idx / (pc.S * pc.seq_inner);
    yo = outer * pc.outer_stride + (pos + s) * pc.seq_inner + idx % pc.seq_inner;
  }
  store0(DT_Y, pc.off_y + yo, y);
}
