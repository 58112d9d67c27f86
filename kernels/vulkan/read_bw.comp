#version 450
// The memory roofline of the benchmarks (no op uses it): reads n 16-byte words of x and writes
// almost nothing, so that its rate is the bandwidth a read-bound kernel (a decode step's matrix-
// vector products) can reach. Each invocation keeps UNROLL loads in flight per trip. LAYOUT 0: a
// grid-stride loop (trip t of invocation i reads words (t * UNROLL + u) * T + i, T invocations in
// the grid); LAYOUT 1: each workgroup reads its own contiguous chunk of the buffer. The words are
// folded with xor and written only when the fold equals pc.never (a value the host picks so that
// it does not occur), which keeps every load without writing.
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint NT = 256;
layout(constant_id = 1) const uint UNROLL = 4;
layout(constant_id = 2) const uint LAYOUT = 0;

layout(push_constant) uniform Push {
  uint n;      // 16-byte words to read
  uint off;    // x's offset in 16-byte words
  uint never;  // see above
} pc;

layout(set = 0, binding = 0, std430) buffer Y { uint y[]; };
layout(set = 0, binding = 1, std430) readonly buffer X { uvec4 x[]; };

void main() {
  const uint groups = gl_NumWorkGroups.x * gl_NumWorkGroups.y;
  const uint g = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint t = gl_LocalInvocationID.x;
  uvec4 acc = uvec4(0);
  if (LAYOUT == 0u) {
    const uint T = groups * NT;
    uint i = g * NT + t;
    for (; i + (UNROLL - 1u) * T < pc.n; i += UNROLL * T) {
      uvec4 v[UNROLL];
      [[unroll]] for (uint u = 0; u < UNROLL; ++u) v[u] = x[pc.off + i + u * T];
      [[unroll]] for (uint u = 0; u < UNROLL; ++u) acc ^= v[u];
    }
    for (; i < pc.n; i += T) acc ^= x[pc.off + i];
  } else {
    const uint span = NT * UNROLL;
    const uint chunk = ((pc.n + groups - 1u) / groups + span - 1u) / span * span;
    const uint begin = g * chunk, end = min(begin + chunk, pc.n);
    uint i = begin + t;
    for (; i + (UNROLL - 1u) * NT < end; i += span) {
      uvec4 v[UNROLL];
      [[unroll]] for (uint u = 0; u < UNROLL; ++u) v[u] = x[pc.off + i + u * NT];
      [[unroll]] for (uint u = 0; u < UNROLL; ++u) acc ^= v[u];
    }
    for (; i < end; i += NT) acc ^= x[pc.off + i];
  }
  const uint s = acc.x ^ acc.y ^ acc.z ^ acc.w;
  if (s == pc.never) y[g * NT + t] = s;
}
