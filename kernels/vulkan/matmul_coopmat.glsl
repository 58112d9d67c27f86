// Body of the cooperative-matrix (tensor core) linear kernel for f16 x and f16 W [N, K]; the
// NV and KHR variants define the matrix types and load/store/multiply macros, then include
// this. 64x64 output tile per workgroup of 4 subgroups (32 invocations each, checked on the
// host), each subgroup a 32x32 quadrant as 2x2 16x16 fragments; K steps of 32 through shared
// memory. Accumulates in f32; bias and the output dtype are applied when the tile is written.
// Bindings: 0 y, 1 x, 2 W, 3 bias.

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT_Y = 0;
layout(constant_id = 1) const uint DT_BIAS = DT_NONE;

layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_sm, a_sk, b_sk, b_sn;
  uint nb1, nb2;
  uint a_sb0, a_sb1, a_sb2, b_sb0, b_sb1, b_sb2;
  uint off_y, off_a, off_b, off_bias;
} pc;

const uint BM = 64, BN = 64, BK = 32;
shared float16_t As[BM * BK];  // row-major [m][k]
shared float16_t Bs[BN * BK];  // [n][k]: column-major K x N for the B operand
shared float Cs[BM * BN];

void main() {
  uint t = gl_LocalInvocationID.x;
  uint warp = t / 32u;
  uint wm = (warp / 2u) * 32u, wn = (warp % 2u) * 32u;
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;

  C_T acc[2][2];
  for (uint i = 0; i < 2; ++i)
    for (uint j = 0; j < 2; ++j) acc[i][j] = C_T(0.0);

  for (uint k0 = 0; k0 < pc.K; k0 += BK) {
    for (uint e = t; e < BM * BK; e += 128u) {
      uint r = e / BK, k = k0 + e % BK;
      uint m = m0 + r, n = n0 + r;
      As[e] = (m < pc.M && k < pc.K) ? b1_f16[pc.off_a + m * pc.a_sm + k * pc.a_sk] : float16_t(0.0);
      Bs[e] = (n < pc.N && k < pc.K) ? b2_f16[pc.off_b + n * pc.K + k] : float16_t(0.0);
    }
    barrier();
    for (uint kk = 0; kk < BK; kk += 16u) {
      A_T a[2];
      B_T b[2];
      for (uint i = 0; i < 2; ++i) LOAD_A(a[i], As, (wm + 16u * i) * BK + kk, BK);
      for (uint j = 0; j < 2; ++j) LOAD_B(b[j], Bs, (wn + 16u * j) * BK + kk, BK);
      for (uint i = 0; i < 2; ++i)
        for (uint j = 0; j < 2; ++j) acc[i][j] = MMA(a[i], b[j], acc[i][j]);
    }
    barrier();
  }
  for (uint i = 0; i < 2; ++i)
    for (uint j = 0; j < 2; ++j) STORE_C(acc[i][j], Cs, (wm + 16u * i) * BN + wn + 16u * j, BN);
  barrier();
  for (uint e = t; e < BM * BN; e += 128u) {
    uint m = m0 + e / BN, n = n0 + e % BN;
    if (m >= pc.M || n >= pc.N) continue;
    float b = DT_BIAS != DT_NONE ? load3(DT_BIAS, pc.off_bias + n) : 0.0;
    store0(DT_Y, pc.off_y + m * pc.N + n, Cs[e] + b);
  }
}
