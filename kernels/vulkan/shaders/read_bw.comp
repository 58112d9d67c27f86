#version 450
// The memory roofline of the benchmarks (no op uses it): reads n 16-byte words of x and writes
// almost nothing, so that its rate is the bandwidth a read-bound kernel (a decode step's matrix-
// vector products) can reach. Each invocation keeps UNROLL loads in flight per trip. LAYOUT 0: a
// grid-stride loop (trip t of invocation i reads words (t * UNROLL + u) * T + i, T invocations in
// the grid); LAYOUT 1: each workgroup reads its own contiguous chunk of the buffer. The words are
// folded with xor and written only when the fold equals pc.never (one chance in 2^32 for each
// invocation), which keeps every load without writing. MODE 1 copies instead (z = x, the same
// words in the same order: the best copy a Vulkan kernel does); MODE 2 xors every invocation's
// fold into y[0] (atomically), for the host to check that the configuration reads every word.
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint NT = 256;
layout(constant_id = 1) const uint UNROLL = 4;
layout(constant_id = 2) const uint LAYOUT = 0;
layout(constant_id = 3) const uint MODE = 0;

layout(push_constant) uniform Push {
  uint n;      // 16-byte words to read
  uint off;    // x's offset in 16-byte words
  uint never;  // see above
  uint offz;   // z's offset in 16-byte words
} pc;

layout(set = 0, binding = 0, std430) buffer Y { uint y[]; };
layout(set = 0, binding = 1, std430) readonly buffer X { uvec4 x[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Z { uvec4 z[]; };

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
      if (MODE == 1u) {
        [[unroll]] for (uint u = 0; u < UNROLL; ++u) z[pc.offz + i + u * T] = v[u];
      } else {
        [[unroll]] for (uint u = 0; u < UNROLL; ++u) acc ^= v[u];
      }
    }
    for (; i < pc.n; i += T) {
      const uvec4 v = x[pc.off + i];
      if (MODE == 1u) z[pc.offz + i] = v;
      else acc ^= v;
    }
  } else {
    const uint span = NT * UNROLL;
    const uint chunk = ((pc.n + groups - 1u) / groups + span - 1u) / span * span;
    const uint begin = g * chunk, end = min(begin + chunk, pc.n);
    uint i = begin + t;
    for (; i + (UNROLL - 1u) * NT < end; i += span) {
      uvec4 v[UNROLL];
      [[unroll]] for (uint u = 0; u < UNROLL; ++u) v[u] = x[pc.off + i + u * NT];
      if (MODE == 1u) {
        [[unroll]] for (uint u = 0; u < UNROLL; ++u) z[pc.offz + i + u * NT] = v[u];
      } else {
        [[unroll]] for (uint u = 0; u < UNROLL; ++u) acc ^= v[u];
      }
    }
    for (; i < end; i += NT) {
      const uvec4 v = x[pc.off + i];
      if (MODE == 1u) z[pc.offz + i] = v;
      else acc ^= v;
    }
  }
  const uint s = acc.x ^ acc.y ^ acc.z ^ acc.w;
  if (MODE == 2u) atomicXor(y[0], s);
  else if (MODE == 0u && s == pc.never) y[t] = s;
}
