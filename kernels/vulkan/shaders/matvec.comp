#version 450
#extension GL_EXT_control_flow_attributes : require
// Decode-shape linear whose partial sums meet through subgroupAdd (see matvec_body.glsl).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"
#include "matvec_body.glsl"
