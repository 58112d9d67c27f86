#version 450
// Tensor-core linear through GL_NV_cooperative_matrix2 (workgroup-scope matrices): y = act(x W^T
// + bias) + res for f16 W [N, K] and f16 or f32 x [M, K] (rows a_sm apart; f32 rounded to halves
// as it loads, as matmul_coopmat.glsl does), sums in f32. The driver moves each BM x BK tile of x
// and BK x BN tile of W^T (W read through a transposed view) into the tensor cores itself, with
// whatever staging and pipelining the GPU does best, so this kernel only walks K. (Loading each
// step's tiles a step ahead of its multiply, or copying them through two buffers of shared memory
// first, measured 10-40% slower on an H100: bench/vulkan/README.md.) Workgroups whose
// tile lies inside M x N with K a multiple of BK load through unclamped layouts (the last row of
// tiles moved inside M where SHIFT_LAST says so); edge tiles load through clamped ones (zeros
// outside) and the store drops what lies outside M x N. The bias, act
// and residual are applied element by element (coopMatPerElementNV) before the tile is stored.
// Built only with the slang glslang (runtime/backends/vulkan/glslang_cm2.py); the host requires
// K % 8 == 0 and 8-element-aligned rows and offsets, as the other tensor-core kernels do.
// Bindings: 0 y, 1 x, 2 W, 3 bias, 4 residual; 5, 6 for split K (matmul_cm2_common.glsl).
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "matmul_cm2_common.glsl"

#define MAT_A coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_B coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>

// bias, act, residual at tile element (r, c) of the tile whose corner is (m0, n0).
float epilogue(const in uint r, const in uint c, const in float e, const in uint m0, const in uint n0) {
  return epilogue_mn(m0 + r, n0 + c, e);
}

// One K step at k through layouts LA / LB: acc += x[m0 .., k ..] W[n0 .., k ..]^T.
#define STEP(LA, LB, k)                                                                              \
  {                                                                                                  \
    MAT_A a;                                                                                         \
    if (DT_A == DT_F32) {                                                                            \
      coopmat<float, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> af;                                   \
      coopMatLoadTensorNV(af, b1_f32, pc.off_a, sliceTensorLayoutNV(LA, m0, BM, k, BK));              \
      a = MAT_A(af);                                                                                 \
    } else {                                                                                         \
      coopMatLoadTensorNV(a, b1_f16, pc.off_a, sliceTensorLayoutNV(LA, m0, BM, k, BK));               \
    }                                                                                                \
    MAT_B b;                                                                                         \
    coopMatLoadTensorNV(b, b2_f16, pc.off_b, sliceTensorLayoutNV(LB, n0, BN, k, BK), transposed);     \
    acc = coopMatMulAdd(a, b, acc);                                                                  \
  }

void main() {
  const uint n0 = gl_WorkGroupID.x * BN;
  uint m0 = gl_WorkGroupID.y * BM;
  if (SHIFT_LAST != 0u && m0 + BM > pc.M) m0 = pc.M - BM;
  const uint K = pc.K, kbeg = k_begin(K), kend = k_end(K);
  // The host keeps rows 8-element aligned: saying so lets the loads use 16-byte accesses.
  const uint a_sm = pc.a_sm & ~7u, k8 = K & ~7u;
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
  ACC acc = ACC(0.0);

#define A_LAYOUT(l)                         \
  l = setTensorLayoutDimensionNV(l, pc.M, K); \
  l = setTensorLayoutStrideNV(l, a_sm, 1);
#define B_LAYOUT(l)                         \
  l = setTensorLayoutDimensionNV(l, pc.N, K); \
  l = setTensorLayoutStrideNV(l, k8, 1);
  // A tile past x's last row clamps only x's loads: W's rows are all there (as in
  // matmul_wa_cm2.comp, whose W loads through a clamped layout measured 3-4x slower).
  if (n0 + BN <= pc.N && K % BK == 0u) {
    tensorLayoutNV<2> lb = createTensorLayoutNV(2);
    B_LAYOUT(lb)
    if (m0 + BM <= pc.M) {
      tensorLayoutNV<2> la = createTensorLayoutNV(2);
      A_LAYOUT(la)
      K_LOOP(la, lb)
    } else {
      tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la =
          createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
      A_LAYOUT(la)
      K_LOOP(la, lb)
    }
  } else {
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> la =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lb =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    A_LAYOUT(la)
    B_LAYOUT(lb)
    for (uint k = kbeg; k < kend; k += BK) STEP(la, lb, k)
  }

  SPLIT_MERGE(acc)
  if (DT_BIAS != DT_NONE || ACT != 0u || DT_RES != DT_NONE) coopMatPerElementNV(acc, acc, epilogue, m0, n0);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly = y_layout();
  if (DT_Y == DT_F16) {
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> y16 =
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
    coopMatStoreTensorNV(y16, b0_f16, pc.off_y, sliceTensorLayoutNV(ly, m0, BM, n0, BN));
  } else {
    coopMatStoreTensorNV(acc, b0_f32, pc.off_y, sliceTensorLayoutNV(ly, m0, BM, n0, BN));
  }
}
