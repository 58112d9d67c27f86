#version 450
// Tensor-core linear through GL_NV_cooperative_matrix (compiles with Debian's glslc).
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#define A_T fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define B_T fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define C_T fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#define LOAD_A(m, arr, off, st) coopMatLoadNV(m, arr, off, st, false)
#define LOAD_B(m, arr, off, st) coopMatLoadNV(m, arr, off, st, true)
#define STORE_C(m, arr, off, st) coopMatStoreNV(m, arr, off, st, false)
#define MMA(a, b, c) coopMatMulAddNV(a, b, c)
#include "matmul_coopmat.glsl"
