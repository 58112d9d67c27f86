#version 450
// max_pool2d over x [N, C, H, W] (any strides), one invocation per output element of the dense
// y [N, C, OH, OW]. Padded positions are skipped, never taken: a window that covers only padding
// gives -inf. nan propagates, as in the CPU kernel. Bindings: 0 y, 1 x.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint DT_Y = 0;

layout(push_constant) uniform Push {
  uint total, C, H, W, OH, OW;
  uint sn, sc, sh, sw;  // x's element strides
  uint kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
  uint off_y, off_x;
} pc;

void main() {
  uint i = flat_invocation();
  if (i >= pc.total) return;
  uint ox = i % pc.OW;
  uint q = i / pc.OW;
  uint oy = q % pc.OH;
  q /= pc.OH;
  uint c = q % pc.C;
  uint n = q / pc.C;
  uint base = pc.off_x + n * pc.sn + c * pc.sc;
  int y0 = int(oy * pc.stride_h) - int(pc.pad_h);
  int x0 = int(ox * pc.stride_w) - int(pc.pad_w);
  float m = -1.0 / 0.0;
  for (uint ky = 0; ky < pc.kh; ++ky) {
    int iy = y0 + int(ky * pc.dil_h);
    if (iy < 0 || iy >= int(pc.H)) continue;
    uint rowo = base + uint(iy) * pc.sh;
    for (uint kx = 0; kx < pc.kw; ++kx) {
      int ix = x0 + int(kx * pc.dil_w);
      if (ix < 0 || ix >= int(pc.W)) continue;
      float v = load1(DT_X, rowo + uint(ix) * pc.sw);
      if (v > m || isnan(v)) m = v;
    }
  }
  store0(DT_Y, pc.off_y + i, m);
}
