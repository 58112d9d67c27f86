#version 450
#extension GL_EXT_control_flow_attributes : require
// Decode-shape linear for devices without subgroup arithmetic: the same kernel as matvec.comp with
// a shared-memory reduction tree (a separate module, since a module that declares the subgroup
// capability is invalid on such a device even if the path is never taken).
#define MATVEC_SHARED_REDUCE 1
#include "common.glsl"
#include "matvec_body.glsl"
