// Declarations shared by the workgroup-scope linear kernels (matmul_cm2.comp with x as the A
// matrix, matmul_wa_cm2.comp with W as the A matrix): specialisation constants, push constants
// (matmul_push.glsl, the batch fields unused), the epilogue inside M x N and y's store layout.
// Bindings: 0 y, 1 x, 2 W, 3 bias, 4 residual.
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

#include "matmul_push.glsl"

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

// The K walk of a tile through layouts L1 / L2, UNROLL steps of BK a pass, then the rest: each
// kernel defines STEP(L1, L2, k) (one K step) and BK, and has K in scope.
#define K_LOOP(L1, L2)                                                       \
  {                                                                          \
    uint k = 0;                                                              \
    for (; k + UNROLL * BK <= K; k += UNROLL * BK) {                         \
      [[unroll]] for (uint u = 0; u < UNROLL; ++u) STEP(L1, L2, k + u * BK) \
    }                                                                        \
    for (; k < K; k += BK) STEP(L1, L2, k)                                   \
  }
