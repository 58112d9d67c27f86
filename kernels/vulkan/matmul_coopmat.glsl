// Body of the cooperative-matrix (tensor core) linear kernel for f16 x and f16 W [N, K]; the
// NV and KHR variants define the matrix types and load/store/multiply macros, then include
// this. 128x128 output tile per workgroup of 8 subgroups (32 invocations each, checked on the
// host) arranged 2 x 4, each computing a 64x32 warp tile as 4x2 16x16 fragments; K advances
// 32 at a time through shared memory, filled with 16-byte global loads (the host guarantees
// K % 8 == 0 and 16-byte aligned rows). Accumulates in f32; bias and the output dtype are
// applied while each fragment is written out through a per-subgroup staging area.
// Bindings: 0 y, 1 x, 2 W, 3 bias.

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_Y = 0;
layout(constant_id = 1) const uint DT_BIAS = DT_NONE;

layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_sm, a_sk, b_sk, b_sn;
  uint nb1, nb2;
  uint a_sb0, a_sb1, a_sb2, b_sb0, b_sb1, b_sb2;
  uint off_y, off_a, off_b, off_bias;
} pc;

layout(set = 0, binding = 1, std430) buffer BufA4 { uvec4 a4[]; };
layout(set = 0, binding = 2, std430) buffer BufB4 { uvec4 w4[]; };

const uint BM = 128, BN = 128, BK = 32;
const uint LDS = BK + 8;  // padded row stride (halves) against shared-memory bank conflicts
shared float16_t As[BM * LDS];  // [m][k]
shared float16_t Bs[BN * LDS];  // [n][k]: column-major K x N for the B operand
shared float Cs[8][16 * 16];

void put8(inout float16_t dst[BM * LDS], uint at, uvec4 p) {}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint warp = t / 32u, lane = t % 32u;
  uint wm = (warp / 4u) * 64u, wn = (warp % 4u) * 32u;
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;

  C_T acc[4][2];
  for (uint i = 0; i < 4; ++i)
    for (uint j = 0; j < 2; ++j) acc[i][j] = C_T(0.0);

  for (uint k0 = 0; k0 < pc.K; k0 += BK) {
    // 128 rows x 4 chunks of 8 halves per operand: 2 chunks per invocation each.
    for (uint c = t; c < BM * (BK / 8u); c += 256u) {
      uint r = c / 4u, kc = (c % 4u) * 8u;
      uint k = k0 + kc;
      uint m = m0 + r, n = n0 + r;
      uvec4 pa = (m < pc.M && k < pc.K) ? a4[(pc.off_a + m * pc.a_sm + k) / 8u] : uvec4(0);
      uvec4 pb = (n < pc.N && k < pc.K) ? w4[(pc.off_b + n * pc.K + k) / 8u] : uvec4(0);
      uint da = r * LDS + kc;
      vec2 h;
      h = unpackHalf2x16(pa.x); As[da + 0u] = float16_t(h.x); As[da + 1u] = float16_t(h.y);
      h = unpackHalf2x16(pa.y); As[da + 2u] = float16_t(h.x); As[da + 3u] = float16_t(h.y);
      h = unpackHalf2x16(pa.z); As[da + 4u] = float16_t(h.x); As[da + 5u] = float16_t(h.y);
      h = unpackHalf2x16(pa.w); As[da + 6u] = float16_t(h.x); As[da + 7u] = float16_t(h.y);
      h = unpackHalf2x16(pb.x); Bs[da + 0u] = float16_t(h.x); Bs[da + 1u] = float16_t(h.y);
      h = unpackHalf2x16(pb.y); Bs[da + 2u] = float16_t(h.x); Bs[da + 3u] = float16_t(h.y);
      h = unpackHalf2x16(pb.z); Bs[da + 4u] = float16_t(h.x); Bs[da + 5u] = float16_t(h.y);
      h = unpackHalf2x16(pb.w); Bs[da + 6u] = float16_t(h.x); Bs[da + 7u] = float16_t(h.y);
    }
    barrier();
    for (uint kk = 0; kk < BK; kk += 16u) {
      A_T a[4];
      B_T b[2];
      for (uint i = 0; i < 4; ++i) LOAD_A(a[i], As, (wm + 16u * i) * LDS + kk, LDS);
      for (uint j = 0; j < 2; ++j) LOAD_B(b[j], Bs, (wn + 16u * j) * LDS + kk, LDS);
      for (uint i = 0; i < 4; ++i)
        for (uint j = 0; j < 2; ++j) acc[i][j] = MMA(a[i], b[j], acc[i][j]);
    }
    barrier();
  }
  for (uint i = 0; i < 4; ++i)
    for (uint j = 0; j < 2; ++j) {
      STORE_C(acc[i][j], Cs[warp], 0, 16);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      for (uint e = lane; e < 256u; e += 32u) {
        uint m = m0 + wm + 16u * i + e / 16u, n = n0 + wn + 16u * j + e % 16u;
        if (m < pc.M && n < pc.N) {
          float b = DT_BIAS != DT_NONE ? load3(DT_BIAS, pc.off_bias + n) : 0.0;
          store0(DT_Y, pc.off_y + m * pc.N + n, Cs[warp][e] + b);
        }
      }
      subgroupBarrier();
    }
}
