#version 450
// Direct conv2d (conv1d is H = 1), grouped and depthwise: one invocation per output position and
// CO_BLK consecutive output channels of one group (the host picks CO_BLK dividing the channels
// per group), so each input element is loaded once for all of them and the index arithmetic is
// shared (Parakeet's first subsampling convolution, 1 -> 256 channels: every x element serves
// 256 outputs). In-channels per group from the weight's shape. x may be strided.
// Bindings: 0 y, 1 x, 2 w, 3 bias.
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint DT_W = 0;
layout(constant_id = 2) const uint DT_B = DT_NONE;
layout(constant_id = 3) const uint DT_Y = 0;
layout(constant_id = 4) const uint CO_BLK = 1;

// n: invocations (outputs / CO_BLK).
layout(push_constant) uniform Push {
  uint n, Cin, H, W, Cout, Ho, Wo, Kh, Kw;
  uint sh, sw, pt, pl, dh, dw, groups;
  uint x_sb, x_sc, x_sh, x_sw;
  uint off_y, off_x, off_w, off_b;
} pc;

void main() {
  uint idx = flat_invocation();
  if (idx >= pc.n) return;
  uint nblk = pc.Cout / CO_BLK;
  uint ow = idx % pc.Wo;
  uint oh = (idx / pc.Wo) % pc.Ho;
  uint co0 = ((idx / (pc.Wo * pc.Ho)) % nblk) * CO_BLK;
  uint b = idx / (pc.Wo * pc.Ho * nblk);
  uint cig = pc.Cin / pc.groups, cog = pc.Cout / pc.groups;
  uint g = co0 / cog;
  uint kk = pc.Kh * pc.Kw;
  float acc[CO_BLK];
  [[unroll]] for (uint j = 0; j < CO_BLK; ++j) acc[j] = DT_B != DT_NONE ? load3(DT_B, pc.off_b + co0 + j) : 0.0;
  for (uint ci = 0; ci < cig; ++ci) {
    uint xc = pc.off_x + b * pc.x_sb + (g * cig + ci) * pc.x_sc;
    uint wo = pc.off_w + (co0 * cig + ci) * kk;
    for (uint kh = 0; kh < pc.Kh; ++kh) {
      int ih = int(oh * pc.sh + kh * pc.dh) - int(pc.pt);
      if (ih < 0 || ih >= int(pc.H)) continue;
      for (uint kw = 0; kw < pc.Kw; ++kw) {
        int iw = int(ow * pc.sw + kw * pc.dw) - int(pc.pl);
        if (iw < 0 || iw >= int(pc.W)) continue;
        float xv = load1(DT_X, xc + uint(ih) * pc.x_sh + uint(iw) * pc.x_sw);
        uint wk = wo + kh * pc.Kw + kw;
        [[unroll]] for (uint j = 0; j < CO_BLK; ++j) acc[j] += load2(DT_W, wk + j * cig * kk) * xv;
      }
    }
  }
  uint plane = pc.Ho * pc.Wo, y0 = pc.off_y + (b * pc.Cout + co0) * plane + oh * pc.Wo + ow;
  [[unroll]] for (uint j = 0; j < CO_BLK; ++j) store0(DT_Y, y0 + j * plane, acc[j]);
}
