#version 450
// The tensor-core rate that KHR cooperative matrices reach on this device, for the kernel
// benchmark's roofline (no op uses it). Each subgroup chains 16x16x16 multiply-adds over FM x FN
// accumulators: MODE 0 on fragments held in registers the whole time, MODE 1 reloading every A
// and B fragment from shared memory each step (as a matmul's inner loop does), MODE 2 that and a
// workgroup barrier each step (a single-stage K loop's synchronisation). y receives the sums so
// that nothing is optimised away.
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint NT = 256;
layout(constant_id = 1) const uint MODE = 0;
layout(constant_id = 2) const uint FM = 4;
layout(constant_id = 3) const uint FN = 4;
layout(push_constant) uniform Push { uint iters; } pc;
layout(set = 0, binding = 0, std430) buffer Y { float y[]; };

const uint LDS4 = 5u;  // the matmul's padded row stride in 16-byte words (K steps of 32)
const uint WARPS = NT / 32u;
shared uvec4 S[16u * (FM + FN) * LDS4];  // one set of A and B rows, which every subgroup reads

void main() {
  const uint t = gl_LocalInvocationID.x, warp = t / 32u;
  for (uint i = t; i < S.length(); i += NT) {
    const float v = float(i % 7u) * 0.001;
    S[i] = uvec4(packHalf2x16(vec2(v, -v)));
  }
  barrier();
  const uint base = 0;
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a[FM];
  coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b[FN];
  coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator> acc[FM][FN];
  [[unroll]] for (uint i = 0; i < FM; ++i) {
    coopMatLoad(a[i], S, base + 16u * i * LDS4, LDS4, gl_CooperativeMatrixLayoutRowMajor);
    [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>(0.0);
  }
  [[unroll]] for (uint j = 0; j < FN; ++j)
    coopMatLoad(b[j], S, base + 16u * (FM + j) * LDS4, LDS4, gl_CooperativeMatrixLayoutColumnMajor);
  for (uint it = 0; it < pc.iters; ++it) {
    if (MODE >= 1u) {
      const uint kk = (it & 1u) * 2u;  // the two 16-wide halves of a 32-wide K step
      if (MODE == 2u) barrier();
      [[unroll]] for (uint i = 0; i < FM; ++i)
        coopMatLoad(a[i], S, base + 16u * i * LDS4 + kk, LDS4, gl_CooperativeMatrixLayoutRowMajor);
      [[unroll]] for (uint j = 0; j < FN; ++j)
        coopMatLoad(b[j], S, base + 16u * (FM + j) * LDS4 + kk, LDS4, gl_CooperativeMatrixLayoutColumnMajor);
    }
    [[unroll]] for (uint i = 0; i < FM; ++i)
      [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = coopMatMulAdd(a[i], b[j], acc[i][j]);
  }
  const uint dst = (gl_WorkGroupID.x * WARPS + warp) * FM * FN * 256u;
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j)
      coopMatStore(acc[i][j], y, dst + (i * FN + j) * 256u, 16, gl_CooperativeMatrixLayoutRowMajor);
}
