#version 450
// Tiled matmul for linear (y = x W^T + bias, W [N, K] plain or block-quantised) and bmm
// (y = a @ b with strided, broadcast batch dims). 64x64 output tile per workgroup, K in steps of
// 16 through shared memory, 4x4 outputs per invocation. Bindings: 0 y, 1 a/x, 2 b/W, 3 bias.
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_A = 0;
layout(constant_id = 1) const uint DT_B = 0;
layout(constant_id = 2) const uint DT_Y = 0;
layout(constant_id = 3) const uint DT_BIAS = DT_NONE;
layout(constant_id = 4) const uint IS_LINEAR = 1;

layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_sm, a_sk, b_sk, b_sn;  // b strides for bmm only; linear reads W[n * K + k]
  uint nb1, nb2;                // batch dims 1 and 2 (dim 0 is gl_WorkGroupID.z / (nb1 * nb2))
  uint a_sb0, a_sb1, a_sb2, b_sb0, b_sb1, b_sb2;
  uint off_y, off_a, off_b, off_bias;  // off_b in bytes for block-quantised weights
} pc;

const uint BM = 64, BN = 64, BK = 16;
shared float As[BK][BM + 1];
shared float Bs[BK][BN + 1];

float load_b(uint k, uint n, uint boff) {
  if (IS_LINEAR == 1) {
    if (is_quant(DT_B)) {
      uint blk_bytes = DT_B == DT_Q8_0 ? 34u : DT_B == DT_Q4_0 ? 18u : 20u;
      return loadq2(DT_B, boff + n * (pc.K / 32u) * blk_bytes, k >> 5, k & 31u);
    }
    return load2(DT_B, boff + n * pc.K + k);
  }
  return load2(DT_B, boff + k * pc.b_sk + n * pc.b_sn);
}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;
  uint z = gl_WorkGroupID.z;
  uint i2 = z % pc.nb2, i1 = (z / pc.nb2) % pc.nb1, i0 = z / (pc.nb2 * pc.nb1);
  uint aoff = pc.off_a + i0 * pc.a_sb0 + i1 * pc.a_sb1 + i2 * pc.a_sb2;
  uint boff = pc.off_b + i0 * pc.b_sb0 + i1 * pc.b_sb1 + i2 * pc.b_sb2;
  uint yoff = pc.off_y + z * pc.M * pc.N;

  uint tx = t % 16u, ty = t / 16u;
  float acc[4][4];
  for (uint i = 0; i < 4; ++i)
    for (uint j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < pc.K; k0 += BK) {
    // 1024 elements of each tile, 4 per invocation; consecutive invocations walk k for A
    // (x rows are k-contiguous) and n for B.
    for (uint e = t; e < BM * BK; e += 256u) {
      uint kk = e % BK, mm = e / BK;
      uint m = m0 + mm, k = k0 + kk;
      As[kk][mm] = (m < pc.M && k < pc.K) ? load1(DT_A, aoff + m * pc.a_sm + k * pc.a_sk) : 0.0;
      uint kb, nb;
      if (IS_LINEAR == 1) { kb = e % BK; nb = e / BK; } else { nb = e % BN; kb = e / BN; }
      uint n = n0 + nb, k2 = k0 + kb;
      Bs[kb][nb] = (n < pc.N && k2 < pc.K) ? load_b(k2, n, boff) : 0.0;
    }
    barrier();
    for (uint kk = 0; kk < BK; ++kk) {
      float a[4], b[4];
      for (uint i = 0; i < 4; ++i) a[i] = As[kk][ty + 16u * i];
      for (uint j = 0; j < 4; ++j) b[j] = Bs[kk][tx + 16u * j];
      for (uint i = 0; i < 4; ++i)
        for (uint j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    barrier();
  }
  for (uint i = 0; i < 4; ++i) {
    uint m = m0 + ty + 16u * i;
    if (m >= pc.M) continue;
    for (uint j = 0; j < 4; ++j) {
      uint n = n0 + tx + 16u * j;
      if (n >= pc.N) continue;
      float b = DT_BIAS != DT_NONE ? load3(DT_BIAS, pc.off_bias + n) : 0.0;
      store0(DT_Y, yoff + m * pc.N + n, acc[i][j] + b);
    }
  }
}
