// Declarations shared by the workgroup-scope linear kernels (matmul_cm2.comp with x as the A
// matrix, matmul_wa_cm2.comp with W as the A matrix): specialisation constants, push constants
// (matmul_push.glsl, the batch fields unused but three: SPLIT_MERGE's offsets and SHIFT_LAST), the epilogue inside
// M x N, y's store layout, the K walk and the merge of split K ranges.
// Bindings: 0 y, 1 x, 2 W, 3 bias, 4 residual, 5 partial tiles and 6 counters (split K).
layout(local_size_x_id = 9) in;
layout(constant_id = 0) const uint DT_Y = DT_F32;
layout(constant_id = 1) const uint DT_BIAS = DT_NONE;
layout(constant_id = 2) const uint DT_A = DT_F16;
layout(constant_id = 3) const uint DT_RES = DT_NONE;
layout(constant_id = 4) const uint ACT = 0;
// The workgroup's tile: BM x BN of the accumulator, K walked BK at a time.
layout(constant_id = 5) const uint BM = 128;
layout(constant_id = 6) const uint BN = 256;
layout(constant_id = 7) const uint BK = 32;
// K steps per pass of the unrolled main loop.
layout(constant_id = 8) const uint UNROLL = 4;
layout(constant_id = 9) const uint NT = 256;
// K ranges a tile is split into (gl_WorkGroupID.z each), merged by SPLIT_MERGE. The host keeps K
// a multiple of SPLIT * BK where SPLIT > 1.
layout(constant_id = 11) const uint SPLIT = 1;

#include "matmul_push.glsl"
// SPLIT_MERGE's offsets (elements of bindings 5 and 6), in push words the linear kernels leave unused.
#define OFF_PART pc.a_sb0
#define OFF_CNT pc.a_sb1
// 1: the last tile along M, where it would reach past M, starts at M - its rows instead (the host
// sets it where M exceeds a tile and y is not the residual): every load unclamped, the rows it
// shares with the tile before computed twice to the same values.
#define SHIFT_LAST pc.a_sb2
layout(set = 0, binding = 5, std430) coherent buffer BufPart { float part[]; };
layout(set = 0, binding = 6, std430) coherent buffer BufCnt { uint cnt[]; };

#define ACC coopmat<float, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>

// linear_epilogue inside M x N (outside, the element is left as it is).
float epilogue_mn(const in uint m, const in uint n, const in float e) {
  return m < pc.M && n < pc.N ? linear_epilogue(m, n, e) : e;
}

// The layout of y [M, N] for clamped tile stores (what lies outside M x N is dropped).
tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> y_layout() {
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly =
      createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  ly = setTensorLayoutDimensionNV(ly, pc.M, pc.N);
  return setTensorLayoutStrideNV(ly, pc.N, 1);
}

// The K range [kbeg, kend) of this workgroup: all of K, or its part gl_WorkGroupID.z of SPLIT.
// The masks (no-ops: the host keeps K / SPLIT a multiple of BK) tell the compiler that every K
// step starts on a multiple of BK: without them the tile loads ran 4-5x slower on an H100.
uint k_begin(const uint K) { return SPLIT > 1u ? (gl_WorkGroupID.z * (K / SPLIT)) & ~(BK - 1u) : 0u; }
uint k_end(const uint K) { return SPLIT > 1u ? k_begin(K) + ((K / SPLIT) & ~(BK - 1u)) : K; }

// The K walk of a tile through layouts L1 / L2 over [kbeg, kend), UNROLL steps of BK a pass, then
// the rest: each kernel defines STEP(L1, L2, k) (one K step), and has kbeg and kend in scope.
#define K_LOOP(L1, L2)                                                       \
  {                                                                          \
    uint k = kbeg;                                                           \
    for (; k + UNROLL * BK <= kend; k += UNROLL * BK) {                      \
      [[unroll]] for (uint u = 0; u < UNROLL; ++u) STEP(L1, L2, k + u * BK) \
    }                                                                        \
    for (; k < kend; k += BK) STEP(L1, L2, k)                                \
  }

shared bool split_last;

// coopMatPerElementNV callback of SPLIT_MERGE: the sum of tile element (r, c)'s SPLIT partials, in
// the order of their K ranges (the merging workgroup's own among them, as it stored it).
float split_sum(const in uint r, const in uint c, const in float e, const in uint base) {
  float s = 0.0;
  for (uint i = 0; i < SPLIT; ++i) s += part[base + i * BM * BN + r * BN + c];
  return s;
}

// Split K: each of a tile's SPLIT workgroups stores its partial sums ACCV (binding 5, BM x BN per
// workgroup) and counts itself in (binding 6, one counter per tile); the last to arrive replaces
// ACCV by the sum of all SPLIT partials read back in the order of their K ranges, so the sums do
// not depend on which workgroup came last, and leaves the counter at zero; the others return.
// Written out in place rather than as a function taking the matrix, and summing element by element
// rather than through more matrices, so that no second accumulator needs registers.
#define SPLIT_MERGE(ACCV)                                                                              \
  if (SPLIT > 1u) {                                                                                    \
    const uint tile_ = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;                       \
    const uint base_ = OFF_PART + tile_ * SPLIT * BM * BN;                                             \
    tensorLayoutNV<2> lp_ = createTensorLayoutNV(2);                                                   \
    lp_ = setTensorLayoutDimensionNV(lp_, BM, BN);                                                     \
    lp_ = setTensorLayoutStrideNV(lp_, BN, 1);                                                         \
    coopMatStoreTensorNV(ACCV, part, base_ + gl_WorkGroupID.z * BM * BN, lp_);                         \
    memoryBarrierBuffer();                                                                             \
    barrier();                                                                                         \
    if (gl_LocalInvocationIndex == 0u) split_last = atomicAdd(cnt[OFF_CNT + tile_], 1u) == SPLIT - 1u; \
    barrier();                                                                                         \
    if (!split_last) return;                                                                           \
    memoryBarrierBuffer();                                                                             \
    coopMatPerElementNV(ACCV, ACCV, split_sum, base_);                                                 \
    if (gl_LocalInvocationIndex == 0u) cnt[OFF_CNT + tile_] = 0u;                                      \
  }
