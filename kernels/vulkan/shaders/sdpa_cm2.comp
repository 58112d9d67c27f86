#version 450
// Flash attention through GL_NV_cooperative_matrix2 (workgroup-scope matrices): y = softmax(scale
// Q K^T [+ causal limit]) V for f16 or f32 Q, K, V (f32 rounded to halves as it loads) with head
// dims D = Dv = DMAX (64 or 128), no mask and no window. A workgroup owns BR query rows of one head:
// Q [BR, D] stays in one A matrix; keys go by in tiles of BC. Each tile's scores S = Q K^T (K
// through a transposed view, f32 sums) are scaled, cut at the causal limit and past the keys, and
// go through the online softmax as whole matrices: the running row maxima M and sums L are BR x BC
// matrices whose columns repeat each row's value (row reductions), P = exp(S - M), and the output
// O [BR, Dv] (f32) is rescaled by exp(Mold - M) spread over Dv columns before P V is added. O / L
// is stored through a clamped layout (rows past Lq dropped). Q and each tile of K and V load
// through unclamped layouts where the whole tile lies inside the rows or keys, through clamped
// ones (zeros past the end) only for a last partial tile (CLAMP_ALL = 1: every tile). Workgroups
// of late rows start first (they see the most keys under the causal limit). Same push constants and bindings as sdpa.comp
// (0 y, 1 q, 2 k, 3 v); the host requires rows and offsets 8-element aligned.
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "sdpa_common.glsl"

layout(local_size_x_id = 6) in;
layout(constant_id = 0) const uint DT_Y = DT_F32;
layout(constant_id = 1) const uint DT_QKV = DT_F16;  // q, k and v alike
layout(constant_id = 2) const uint CAUSAL = 0;
layout(constant_id = 3) const uint DMAX = 128;
layout(constant_id = 4) const uint BR = 64;
layout(constant_id = 5) const uint BC = 64;
layout(constant_id = 6) const uint NT = 128;
// 1: every tile loads through clamped layouts; 0: only tiles reaching past the rows or keys do.
layout(constant_id = 7) const uint CLAMP_ALL = 0;

layout(push_constant) uniform Push {
  SDPA_PUSH_FIELDS
} pc;

#define MAT_S coopmat<float, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseAccumulator>
#define MAT_O coopmat<float, gl_ScopeWorkgroup, BR, DMAX, gl_MatrixUseAccumulator>
#define MAT_Q coopmat<float16_t, gl_ScopeWorkgroup, BR, DMAX, gl_MatrixUseA>
#define MAT_KT coopmat<float16_t, gl_ScopeWorkgroup, DMAX, BC, gl_MatrixUseB>
#define MAT_P coopmat<float16_t, gl_ScopeWorkgroup, BR, BC, gl_MatrixUseA>
#define MAT_V coopmat<float16_t, gl_ScopeWorkgroup, BC, DMAX, gl_MatrixUseB>
#define CLAMPED tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV>

// A finite floor for the running maxima: exp(Mold - M) stays a number while a row has seen only
// cut scores (-inf, whose exp(-inf - M) is 0).
const float M_FLOOR = -1e30;
const float NEG_INF = -1.0 / 0.0;

float max_of(const in float a, const in float b) { return max(a, b); }
float sum_of(const in float a, const in float b) { return a + b; }
float first_of(const in float a, const in float b) { return a; }
float max_elem(const in uint r, const in uint c, const in float a, const in float b) { return max(a, b); }
float exp_elem(const in uint r, const in uint c, const in float a) { return exp(a); }
// exp rounded to a half: P's row sums then add the weights P V multiplies, so each output row's
// weights sum to 1 whatever the rounding (rows that see few keys do not average it away).
float exp_half(const in uint r, const in uint c, const in float a) { return float(float16_t(exp(a))); }
// Scores past the keys, or past row i0 + r's causal limit (its position Lk - Lq + i0 + r), cut.
float cut_elem(const in uint r, const in uint c, const in float s, const in uint i0, const in uint k0) {
  const uint key = k0 + c;
  if (key >= pc.Lk || (CAUSAL == 1u && key > pc.Lk - pc.Lq + i0 + r)) return NEG_INF;
  return s;
}

void main() {
  const uint blk = gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x;
  const uint i0 = blk * BR, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  const uint hk = h / (pc.Hq / pc.Hkv);
  const uint qo = pc.off_q + b * pc.q_sb + h * pc.q_sh;
  const uint ko = pc.off_k + b * pc.k_sb + hk * pc.k_sh;
  const uint vo = pc.off_v + b * pc.v_sb + hk * pc.v_sh;
  const uint last = min(pc.Lq, i0 + BR) - 1u;
  const uint kend = CAUSAL == 1u ? min(pc.Lk, pc.Lk - pc.Lq + last + 1u) : pc.Lk;
  // Keys at or past this need no cut for any row of the block (the first row's limit).
  const uint kfree = CAUSAL == 1u ? min(pc.Lk, pc.Lk - pc.Lq + i0 + 1u) : pc.Lk;
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);

#define QKV_LAYOUT(l, rows, stride)           \
  l = setTensorLayoutDimensionNV(l, rows, DMAX); \
  l = setTensorLayoutStrideNV(l, stride & ~7u, 1);
#define LOAD_Q(L)                                                                  \
  if (DT_QKV == DT_F32) {                                                          \
    coopmat<float, gl_ScopeWorkgroup, BR, DMAX, gl_MatrixUseA> qf;                 \
    coopMatLoadTensorNV(qf, b1_f32, qo, sliceTensorLayoutNV(L, i0, BR, 0, DMAX));  \
    q = MAT_Q(qf);                                                                 \
  } else {                                                                         \
    coopMatLoadTensorNV(q, b1_f16, qo, sliceTensorLayoutNV(L, i0, BR, 0, DMAX));   \
  }
  MAT_Q q;
  if (CLAMP_ALL == 0u && i0 + BR <= pc.Lq) {
    tensorLayoutNV<2> uq = createTensorLayoutNV(2);
    QKV_LAYOUT(uq, pc.Lq, pc.q_sl)
    LOAD_Q(uq)
  } else {
    CLAMPED lq = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    QKV_LAYOUT(lq, pc.Lq, pc.q_sl)
    LOAD_Q(lq)
  }

  MAT_O o = MAT_O(0.0);
  MAT_S m = MAT_S(M_FLOOR), l = MAT_S(0.0);
  const float scale = pc.scale;
  // One tile of keys from k0, K and V loaded through layouts LK and LV.
#define KEY_TILE(LK, LV)                                                                                  \
  {                                                                                                       \
    MAT_KT kt;                                                                                            \
    if (DT_QKV == DT_F32) {                                                                               \
      coopmat<float, gl_ScopeWorkgroup, DMAX, BC, gl_MatrixUseB> kf;                                      \
      coopMatLoadTensorNV(kf, b2_f32, ko, sliceTensorLayoutNV(LK, k0, BC, 0, DMAX), transposed);          \
      kt = MAT_KT(kf);                                                                                    \
    } else {                                                                                              \
      coopMatLoadTensorNV(kt, b2_f16, ko, sliceTensorLayoutNV(LK, k0, BC, 0, DMAX), transposed);          \
    }                                                                                                     \
    MAT_S s = MAT_S(0.0);                                                                                 \
    s = coopMatMulAdd(q, kt, s);                                                                          \
    s = s * scale;                                                                                        \
    if (k0 + BC > kfree) coopMatPerElementNV(s, s, cut_elem, i0, k0);                                     \
    MAT_S rowmax, mold = m, p, em, rowsum;                                                                \
    coopMatReduceNV(rowmax, s, gl_CooperativeMatrixReduceRowNV, max_of);                                  \
    coopMatPerElementNV(m, rowmax, max_elem, mold);                                                       \
    coopMatPerElementNV(p, s - m, exp_half);                                                              \
    coopMatPerElementNV(em, mold - m, exp_elem);                                                          \
    coopMatReduceNV(rowsum, p, gl_CooperativeMatrixReduceRowNV, sum_of);                                  \
    l = em * l + rowsum;                                                                                  \
    MAT_V v;                                                                                              \
    if (DT_QKV == DT_F32) {                                                                               \
      coopmat<float, gl_ScopeWorkgroup, BC, DMAX, gl_MatrixUseB> vf;                                      \
      coopMatLoadTensorNV(vf, b3_f32, vo, sliceTensorLayoutNV(LV, k0, BC, 0, DMAX));                      \
      v = MAT_V(vf);                                                                                      \
    } else {                                                                                              \
      coopMatLoadTensorNV(v, b3_f16, vo, sliceTensorLayoutNV(LV, k0, BC, 0, DMAX));                       \
    }                                                                                                     \
    /* exp(Mold - M) of each row, spread over the output's columns. */                                   \
    MAT_O eo;                                                                                             \
    coopMatReduceNV(eo, em, gl_CooperativeMatrixReduceRowNV, first_of);                                   \
    MAT_O pv = MAT_O(0.0);                                                                                \
    pv = coopMatMulAdd(MAT_P(p), v, pv);                                                                  \
    o = eo * o + pv;                                                                                      \
  }
  // Whole tiles of keys through unclamped layouts (clamped loads measured several times slower in
  // the matmul kernels), the last partial one through clamped ones.
  const uint kwhole = CLAMP_ALL == 1u ? 0u : pc.Lk / BC * BC;
  tensorLayoutNV<2> uk = createTensorLayoutNV(2), uv = createTensorLayoutNV(2);
  QKV_LAYOUT(uk, pc.Lk, pc.k_sl)
  QKV_LAYOUT(uv, pc.Lk, pc.v_sl)
  uint k0 = 0;
  [[dont_unroll]] for (; k0 < kend && k0 + BC <= kwhole; k0 += BC) KEY_TILE(uk, uv)
  if (k0 < kend) {
    CLAMPED lk = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    CLAMPED lv = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    QKV_LAYOUT(lk, pc.Lk, pc.k_sl)
    QKV_LAYOUT(lv, pc.Lk, pc.v_sl)
    [[dont_unroll]] for (; k0 < kend; k0 += BC) KEY_TILE(lk, lv)
  }

  MAT_O lo;
  coopMatReduceNV(lo, l, gl_CooperativeMatrixReduceRowNV, first_of);
  [[unroll]] for (uint e = 0; e < o.length(); ++e) o[e] = o[e] / lo[e];

  CLAMPED ly = createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
  ly = setTensorLayoutDimensionNV(ly, pc.Lq, DMAX);
  ly = setTensorLayoutStrideNV(ly, DMAX, 1);
  const uint yo = pc.off_y + (b * pc.Hq + h) * pc.Lq * DMAX;
  if (DT_Y == DT_F16) {
    coopmat<float16_t, gl_ScopeWorkgroup, BR, DMAX, gl_MatrixUseAccumulator> y16 =
        coopmat<float16_t, gl_ScopeWorkgroup, BR, DMAX, gl_MatrixUseAccumulator>(o);
    coopMatStoreTensorNV(y16, b0_f16, yo, sliceTensorLayoutNV(ly, i0, BR, 0, DMAX));
  } else {
    coopMatStoreTensorNV(o, b0_f32, yo, sliceTensorLayoutNV(ly, i0, BR, 0, DMAX));
  }
}
