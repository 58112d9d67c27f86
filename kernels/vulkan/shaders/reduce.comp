#version 450
// reduce_sum / reduce_mean / reduce_max / reduce_min: y[row] reduces a strided sub-space of x.
// The host splits x's dims into kept dims (the output rows, in output order) and reduced dims,
// each group collapsed to at most 4 dims with their element strides. A workgroup of 256 takes
// 256 / T rows, T threads a row; each thread walks every T-th element of its row's sub-space
// and the T partial results meet in a shared-memory tree. With LANE_MAJOR the threads of one
// lane index are adjacent rows (reads coalesce across rows when the reduced dims are strided
// and the kept ones dense), else the threads of one row are adjacent (reads coalesce along a
// unit-stride reduced dim: a global average pool). Accumulates in f32; max and min propagate
// nan; an empty reduction gives 0 (sum), nan (mean), -inf (max), +inf (min).
// Bindings: 0 y (dense), 1 x.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint MODE = 0;  // 0 sum, 1 mean, 2 max, 3 min
layout(constant_id = 1) const uint DT_X = 0;
layout(constant_id = 2) const uint DT_Y = 0;
layout(constant_id = 3) const uint T = 256;           // threads a row, a power of two
layout(constant_id = 4) const uint LANE_MAJOR = 0;
layout(constant_id = 5) const uint KRANK = 1;         // kept dims, 1..4
layout(constant_id = 6) const uint RRANK = 1;         // reduced dims, 1..4

layout(push_constant) uniform Push {
  uint rows, count;
  uint kshape[4];  // kept dims, outermost first
  uint kstride[4];
  uint rshape[4];  // reduced dims, outermost first
  uint rstride[4];
  uint off_y, off_x;
} pc;

const uint WG = 256;
const uint R = WG / T;  // rows a workgroup
shared float red[WG];

float identity() {
  if (MODE == 2) return -1.0 / 0.0;
  if (MODE == 3) return 1.0 / 0.0;
  return 0.0;
}

float combine(float acc, float v) {
  if (MODE == 2) return (v > acc || isnan(v)) ? v : acc;
  if (MODE == 3) return (v < acc || isnan(v)) ? v : acc;
  return acc + v;
}

// x's element offset of output row `row` (its kept-dim index).
uint row_offset(uint row) {
  uint off = 0;
  for (int d = int(KRANK) - 1; d >= 0; --d) {
    uint n = pc.kshape[d];
    off += (row % n) * pc.kstride[d];
    row /= n;
  }
  return off;
}

// Offset of element j of the reduced sub-space.
uint red_offset(uint j) {
  if (RRANK == 1) return j * pc.rstride[0];
  uint off = 0;
  for (int d = int(RRANK) - 1; d >= 0; --d) {
    uint n = pc.rshape[d];
    off += (j % n) * pc.rstride[d];
    j /= n;
  }
  return off;
}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint r = LANE_MAJOR == 1 ? t % R : t / T;
  uint lane = LANE_MAJOR == 1 ? t / R : t % T;
  uint row = flat_group() * R + r;
  bool live = row < pc.rows;
  float acc = identity();
  if (live) {
    uint base = pc.off_x + row_offset(row);
    for (uint j = lane; j < pc.count; j += T) acc = combine(acc, load1(DT_X, base + red_offset(j)));
  }
  if (T > 1) {
    uint slot = LANE_MAJOR == 1 ? lane * R + r : t;
    uint step = LANE_MAJOR == 1 ? R : 1;
    red[slot] = acc;
    barrier();
    for (uint s = T / 2; s > 0; s >>= 1) {
      if (lane < s) red[slot] = combine(red[slot], red[slot + s * step]);
      barrier();
    }
    acc = red[slot];
  }
  if (!live || lane != 0) return;
  if (MODE == 1) acc = pc.count == 0 ? uintBitsToFloat(0x7fc00000u) : acc / float(pc.count);
  store0(DT_Y, pc.off_y + row, acc);
}
