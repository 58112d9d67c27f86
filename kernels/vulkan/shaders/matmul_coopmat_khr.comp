#version 450
// Tensor-core linear through GL_KHR_cooperative_matrix (needs glslang >= 13).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#define A_T coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define B_T coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define C_T coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
#define LOAD_A(m, arr, off, st) coopMatLoad(m, arr, off, st, gl_CooperativeMatrixLayoutRowMajor)
#define LOAD_B(m, arr, off, st) coopMatLoad(m, arr, off, st, gl_CooperativeMatrixLayoutColumnMajor)
#define STORE_C(m, arr, off, st) coopMatStore(m, arr, off, st, gl_CooperativeMatrixLayoutRowMajor)
#define MMA(a, b, c) coopMatMulAdd(a, b, c)
#include "matmul_coopmat.glsl"
