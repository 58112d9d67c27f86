// The push constants of the matmul kernels (matmul_coopmat.glsl's linear and bmm, and the
// workgroup-scope linear kernels through matmul_cm2_common.glsl), and linear's epilogue. Include
// after declaring DT_BIAS, ACT and DT_RES.
layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_sm, a_sk, b_sk, b_sn;      // x's strides (rows, K); B's (bmm)
  uint nb1, nb2;                    // bmm: batch dims 1 and 2 (dim 0 follows from the grid)
  uint a_sb0, a_sb1, a_sb2, b_sb0, b_sb1, b_sb2;  // bmm: batch strides
  uint off_y, off_a, off_b, off_bias;
  uint off_res, res_sm;
} pc;

// y[m][n] from the sum v: bias, act, then the residual.
float linear_epilogue(const in uint m, const in uint n, float v) {
  if (DT_BIAS != DT_NONE) v += load3(DT_BIAS, pc.off_bias + n);
  v = apply_act(ACT, v);
  if (DT_RES != DT_NONE) v += load4(DT_RES, pc.off_res + m * pc.res_sm + n);
  return v;
}
