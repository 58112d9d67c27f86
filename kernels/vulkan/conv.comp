#version 450
// Direct conv2d (conv1d is H = 1), grouped and depthwise: one invocation per output element,
// in-channels per group from the weight's shape. x may be strided. Bindings: 0 y, 1 x, 2 w, 3 bias.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_X = 0;
layout(constant_id = 1) const uint DT_W = 0;
layout(constant_id = 2) const uint DT_B = DT_NONE;
layout(constant_id = 3) const uint DT_Y = 0;

layout(push_constant) uniform Push {
  uint n, Cin, H, W, Cout, Ho, Wo, Kh, Kw;
  uint sh, sw, pt, pl, dh, dw, groups;
  uint x_sb, x_sc, x_sh, x_sw;
  uint off_y, off_x, off_w, off_b;
} pc;

void main() {
  uint idx = flat_invocation();
  if (idx >= pc.n) return;
  uint ow = idx % pc.Wo;
  uint oh = (idx / pc.Wo) % pc.Ho;
  uint co = (idx / (pc.Wo * pc.Ho)) % pc.Cout;
  uint b = idx / (pc.Wo * pc.Ho * pc.Cout);
  uint cig = pc.Cin / pc.groups, cog = pc.Cout / pc.groups;
  uint g = co / cog;
  float acc = DT_B != DT_NONE ? load3(DT_B, pc.off_b + co) : 0.0;
  for (uint ci = 0; ci < cig; ++ci) {
    uint xc = pc.off_x + b * pc.x_sb + (g * cig + ci) * pc.x_sc;
    uint wo = pc.off_w + (co * cig + ci) * pc.Kh * pc.Kw;
    for (uint kh = 0; kh < pc.Kh; ++kh) {
      int ih = int(oh * pc.sh + kh * pc.dh) - int(pc.pt);
      if (ih < 0 || ih >= int(pc.H)) continue;
      for (uint kw = 0; kw < pc.Kw; ++kw) {
        int iw = int(ow * pc.sw + kw * pc.dw) - int(pc.pl);
        if (iw < 0 || iw >= int(pc.W)) continue;
        acc += load2(DT_W, wo + kh * pc.Kw + kw) * load1(DT_X, xc + uint(ih) * pc.x_sh + uint(iw) * pc.x_sw);
      }
    }
  }
  store0(DT_Y, pc.off_y + idx, acc);
}
