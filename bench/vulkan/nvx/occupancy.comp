#version 450
// nvx_probe's shader: each workgroup touches SIZE words of shared memory, spins for spin_ns and
// records its multiprocessor and its start and end times (device clock, ns).
#extension GL_NV_shader_sm_builtins : require
#extension GL_EXT_shader_realtime_clock : require
#extension GL_ARB_gpu_shader_int64 : require
layout(local_size_x = 128) in;
layout(constant_id = 0) const uint SIZE = 256;
layout(set = 0, binding = 0) buffer Out { uint64_t o[]; };
layout(push_constant) uniform Push { uint spin_ns; } pc;
shared uint sh[SIZE];
void main() {
  const uint64_t t0 = clockRealtimeEXT();
  sh[gl_LocalInvocationID.x % SIZE] = uint(t0);
  uint64_t t = t0;
  while (t - t0 < uint64_t(pc.spin_ns)) t = clockRealtimeEXT();
  barrier();
  if (gl_LocalInvocationID.x == 0) {
    o[gl_WorkGroupID.x * 3] = uint64_t(gl_SMIDNV);
    o[gl_WorkGroupID.x * 3 + 1] = t0;
    o[gl_WorkGroupID.x * 3 + 2] = t + uint64_t(sh[1] & 0u);
  }
}
