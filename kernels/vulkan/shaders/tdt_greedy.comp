#version 450
// tdt_greedy (ops.def): the whole greedy TDT / RNN-T loop of one stream in one dispatch, or of
// several (lanes): workgroup row y of the dispatch is lane y, its G workgroups a grid of their own
// (own control, state, emitted rows and counters), so lanes never wait on each other. The G
// workgroups of a lane's grid share every phase: each subgroup takes LSTM hidden units (the four gate
// rows of a unit, whose cell update needs nothing else), projection rows or joint output rows,
// its lanes splitting the dot product. Phases meet at a grid barrier (an arrival counter in the
// op's counters), so the host must launch no more workgroups than the device keeps resident at
// once (it launches one per multiprocessor at most over all lanes, one per lane where it cannot
// tell); a barrier that
// waits too long gives up and reports status 1 instead of hanging; status 3 reports loops the
// implementation ended early (a CPU implementation's limit on loop iterations). The joint's argmax meets
// through per-workgroup partial results, which every workgroup then reduces itself, so all of
// them take the same branch without another barrier. Each phase first stages its input vector
// ([x | h], h or the joint's relu(f + g)) in shared memory, so the dot products read it from
// there; f16 weights load eight at a time, an LSTM unit's four gate rows side by side. Argmaxes
// reduce with subgroup operations over order-preserving keys (ties: the lowest index, as argmax
// takes the first maximum).
// A token costs layers + 2 barriers (the LSTM layers, the projection, the joint), a blank one.
// Bindings: 0 emitted (i32), 1 frames (f32), 2 weights (DT_W), 3 vectors (f32), 4 state in,
// 5 state out (f32: h, c, g; also the ping buffer of h), 6 control (i32), 7 counters (u32, per
// lane: the arrival and done counts, two unused words, the argmax partials, the pong buffer of h;
// all left at zero at the end).
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DT_W = 0;

layout(set = 0, binding = 5, std430) coherent buffer StateOut { float so[]; };
layout(set = 0, binding = 6, std430) buffer Control { int ctl[]; };
layout(set = 0, binding = 7, std430) coherent buffer CountersU { uint su[]; };
layout(set = 0, binding = 7, std430) coherent buffer CountersF { float sf[]; };
layout(set = 0, binding = 7, std430) coherent volatile buffer CountersV { uint sv[]; };
layout(set = 0, binding = 2, std430) readonly buffer Weights8 { uvec4 w8[]; };

layout(push_constant) uniform Push {
  uint off_em, off_fr, off_w, off_vec, off_si, off_so, off_ctl, off_cnt;
  uint L, P, J, V, D, R, max_symbols, cap;
  uint dur[8];
} pc;

const uint SPIN_LIMIT = 1u << 22;
const uint WG = 256u;
const uint MAX_VEC = 4096u;  // the longest staged vector: 2 P and J (the host checks)

uint G, wg, lid, gsg, total, lane, nl;
uint ARRIVE, DONE, PART, HB;  // word offsets in the counters
uint EM, CTL, SI, SO;          // this lane's emitted rows, control, state in, state out
uint par = 0u;                      // which buffer holds the current h: 0 state out, 1 counters
uint jpar = 0u;                     // which half of the partials the next joint writes
shared bool s_fail;
shared vec4 s_vec4[MAX_VEC / 4u];
#define SV(i) s_vec4[(i) >> 2][(i) & 3u]
shared uint s_key[WG / 4u], s_idx[WG / 4u], s_key2[WG / 4u], s_idx2[WG / 4u];
shared uint s_k, s_d;

float sigmoid_(float v) { return 1.0 / (1.0 + exp(-v)); }
float tanh_(float v) {
  float e = exp(-2.0 * abs(v));
  float r = (1.0 - e) / (1.0 + e);
  return v < 0.0 ? -r : r;
}
float W(uint i) { return load2(DT_W, pc.off_w + i); }
float get_h(uint p, uint i) { return p == 0u ? so[SO + i] : sf[HB + i]; }
void set_h(uint p, uint i, float v) {
  if (p == 0u) so[SO + i] = v;
  else sf[HB + i] = v;
}

// Eight f16 weights (one 16-byte load) dotted with staged elements [8 k, 8 k + 8).
float dot8(uvec4 w, uint k) {
  return dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), s_vec4[2u * k]) +
         dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), s_vec4[2u * k + 1u]);
}
// Whether weights [w0, w0 + n) go eight at a time: f16, 16-byte aligned.
bool by8(uint w0, uint n) { return DT_W == DT_F16 && ((pc.off_w + w0) & 7u) == 0u && (n & 7u) == 0u; }

// This lane's share of weights [w0, w0 + n) . staged elements [0, n).
float wdot(uint w0, uint n) {
  float s = 0.0;
  const uint e = pc.off_w + w0;
  if (by8(w0, n)) {
    for (uint k = lane; k < n / 8u; k += nl) s += dot8(w8[e / 8u + k], k);
  } else if (DT_W == DT_F32) {
    for (uint k = lane; k < n; k += nl) s += b2_f32[e + k] * SV(k);
  } else {
    for (uint k = lane; k < n; k += nl) s += W(w0 + k) * SV(k);
  }
  return s;
}

// wdot of the four rows at w0, w0 + gap, w0 + 2 gap, w0 + 3 gap (an LSTM unit's gates), their
// loads side by side.
vec4 wdot4(uint w0, uint gap, uint n) {
  if (by8(w0, n) && (gap & 7u) == 0u) {
    const uint b = (pc.off_w + w0) / 8u, g = gap / 8u;
    vec4 s = vec4(0.0);
    for (uint k = lane; k < n / 8u; k += nl) {
      const uvec4 a0 = w8[b + k], a1 = w8[b + g + k], a2 = w8[b + 2u * g + k], a3 = w8[b + 3u * g + k];
      s += vec4(dot8(a0, k), dot8(a1, k), dot8(a2, k), dot8(a3, k));
    }
    return s;
  }
  return vec4(wdot(w0, n), wdot(w0 + gap, n), wdot(w0 + 2u * gap, n), wdot(w0 + 3u * gap, n));
}

// Every workgroup waits here until all G have arrived; writes before it are seen after it. The
// arrival counter only grows (the epoch-th barrier of the call waits for epoch * G arrivals), so
// the last to arrive has nothing to reset or announce: one atomic on the critical path.
uint epoch = 0u;
void grid_sync() {
  memoryBarrierBuffer();
  barrier();
  if (G == 1u) return;
  ++epoch;
  if (lid == 0u) {
    const uint target = epoch * G;
    if (atomicAdd(su[ARRIVE], 1u) + 1u != target) {
      uint spins = 0u;
      while (sv[ARRIVE] < target) {
        if (++spins > SPIN_LIMIT) {
          s_fail = true;
          break;
        }
      }
    }
    memoryBarrierBuffer();
  }
  barrier();
}

// A float's bits as a uint that orders as the floats do (NaN as -inf).
uint order_key(float v) {
  if (isnan(v)) v = -1.0 / 0.0;
  const uint u = floatBitsToUint(v);
  return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u);
}

// (key, idx) becomes (k, i) when that is larger, or equal with a lower index. Every score's key
// is above 0, so (0, ~0u) is the start of a reduction that has seen nothing.
void take(inout uint key, inout uint idx, uint k, uint i) {
  if (k > key || (k == key && i < idx)) {
    key = k;
    idx = i;
  }
}

// The subgroup's largest key and, among lanes holding it, the lowest index.
void subgroup_argmax(inout uint key, inout uint idx) {
  const uint m = subgroupMax(key);
  idx = subgroupMin(key == m ? idx : 0xffffffffu);
  key = m;
}

// Reduces (key, idx) and (key2, idx2) over the workgroup; the result is valid in subgroup 0.
void workgroup_argmax(inout uint key, inout uint idx, inout uint key2, inout uint idx2) {
  subgroup_argmax(key, idx);
  subgroup_argmax(key2, idx2);
  const uint sg = gl_SubgroupID;
  if (lane == 0u) {
    s_key[sg] = key; s_idx[sg] = idx; s_key2[sg] = key2; s_idx2[sg] = idx2;
  }
  barrier();
  if (sg == 0u) {
    key = 0u; idx = 0xffffffffu; key2 = 0u; idx2 = 0xffffffffu;
    for (uint e = lane; e < gl_NumSubgroups; e += nl) {
      take(key, idx, s_key[e], s_idx[e]);
      take(key2, idx2, s_key2[e], s_idx2[e]);
    }
    subgroup_argmax(key, idx);
    subgroup_argmax(key2, idx2);
  }
}

// The prediction network fed `token`, from the h at `par` to the other buffer, then g.
void predict(uint token) {
  const uint P = pc.P, L = pc.L, q = 1u - par;
  for (uint l = 0u; l < L; ++l) {
    const uint wl = l * 8u * P * P, bl = pc.off_vec + pc.V * P + l * 4u * P;
    for (uint k = lid; k < P; k += WG) {
      SV(k) = l == 0u ? b3_f32[pc.off_vec + token * P + k] : get_h(q, (l - 1u) * P + k);
      SV(P + k) = get_h(par, l * P + k);
    }
    barrier();
    for (uint j = gsg; j < P; j += total) {
      const uint r = wl + j * 2u * P;
      const vec4 s = subgroupAdd(wdot4(r, 2u * P * P, 2u * P));
      if (lane == 0u) {
        const vec4 gt = s + vec4(b3_f32[bl + j], b3_f32[bl + P + j], b3_f32[bl + 2u * P + j], b3_f32[bl + 3u * P + j]);
        const uint ci = SO + L * P + l * P + j;
        const float c = sigmoid_(gt.y) * so[ci] + sigmoid_(gt.x) * tanh_(gt.z);
        so[ci] = c;
        set_h(q, l * P + j, sigmoid_(gt.w) * tanh_(c));
      }
    }
    grid_sync();
  }
  par = q;
  const uint wp = L * 8u * P * P, bp = pc.off_vec + pc.V * P + L * 4u * P, hl = (L - 1u) * P;
  for (uint k = lid; k < P; k += WG) SV(k) = get_h(par, hl + k);
  barrier();
  for (uint r = gsg; r < pc.J; r += total) {
    const float s = subgroupAdd(wdot(wp + r * P, P));
    if (lane == 0u) so[SO + 2u * L * P + r] = s + b3_f32[bp + r];
  }
  grid_sync();
}

// The joint of frame row `row`: s_k = the token argmax, s_d = the duration argmax.
void joint(uint row) {
  const uint J = pc.J, O = pc.V + pc.D, g0 = SO + 2u * pc.L * pc.P;
  const uint wo = pc.L * 8u * pc.P * pc.P + J * pc.P, bo = pc.off_vec + pc.V * pc.P + pc.L * 4u * pc.P + J;
  for (uint i = lid; i < J; i += WG) SV(i) = max(0.0, b1_f32[pc.off_fr + row * J + i] + so[g0 + i]);
  barrier();
  uint tk = 0u, ti = 0xffffffffu, dk = 0u, di = 0xffffffffu;
  for (uint r = gsg; r < O; r += total) {
    const uint key = order_key(subgroupAdd(wdot(wo + r * J, J)) + b3_f32[bo + r]);
    if (r < pc.V) take(tk, ti, key, r);
    else take(dk, di, key, r - pc.V);
  }
  workgroup_argmax(tk, ti, dk, di);
  const uint part = PART + (jpar * G + wg) * 4u;
  if (lid == 0u) {
    su[part] = tk; su[part + 1u] = ti; su[part + 2u] = dk; su[part + 3u] = di;
  }
  grid_sync();
  tk = 0u; ti = 0xffffffffu; dk = 0u; di = 0xffffffffu;
  for (uint w = lid; w < G; w += WG) {
    const uint p = PART + (jpar * G + w) * 4u;
    take(tk, ti, su[p], su[p + 1u]);
    take(dk, di, su[p + 2u], su[p + 3u]);
  }
  workgroup_argmax(tk, ti, dk, di);
  if (lid == 0u) {
    s_k = ti < pc.V ? ti : 0u;
    s_d = di < pc.D ? di : 0u;
  }
  jpar = 1u - jpar;
  barrier();
}

void main() {
  G = gl_NumWorkGroups.x;
  wg = gl_WorkGroupID.x;
  lid = gl_LocalInvocationIndex;
  gsg = wg * gl_NumSubgroups + gl_SubgroupID;
  total = G * gl_NumSubgroups;
  lane = gl_SubgroupInvocationID;
  nl = gl_SubgroupSize;
  const uint y = gl_WorkGroupID.y, n_state = 2u * pc.L * pc.P + pc.J;
  EM = pc.off_em + y * (pc.cap + 1u) * 4u;
  CTL = pc.off_ctl + y * 5u;
  SI = pc.off_si + y * n_state;
  SO = pc.off_so + y * n_state;
  ARRIVE = pc.off_cnt + y * (4u + 8u * G + pc.L * pc.P);
  DONE = ARRIVE + 1u;
  PART = ARRIVE + 4u;
  HB = PART + 8u * G;
  if (lid == 0u) s_fail = false;

  int t = ctl[CTL], symbols = ctl[CTL + 1u];
  const int end = ctl[CTL + 2u], row_offset = ctl[CTL + 3u];
  const bool fresh = ctl[CTL + 4u] != 0;
  const uint L = pc.L, P = pc.P, blank = pc.V - 1u;
  for (uint e = gl_GlobalInvocationID.x; e < n_state; e += G * WG) so[SO + e] = fresh ? 0.0 : b4_f32[SI + e];
  uint status = 0u;
  if (wg == 0u && lid == 0u) b0_u32[EM + 3u] = 0u;
  if (t < end && (t + row_offset < 0 || end - 1 + row_offset >= int(pc.R))) status = 2u;
  if (symbols < 0 || symbols >= int(pc.max_symbols)) status = 2u;
  grid_sync();
  if (fresh && status == 0u) predict(blank);
  uint count = 0u;
  bool full = false;
  while (t < end && status == 0u) {
    if (s_fail) {
      status = 1u;
      break;
    }
    joint(uint(t + row_offset));
    const uint k = s_k;
    const int skip = pc.D > 0u ? int(pc.dur[s_d]) : (k == blank ? 1 : 0);
    if (k != blank) {
      if (count == pc.cap) {
        full = true;
        break;
      }
      if (wg == 0u && lid == 0u) {
        const uint o = EM + (1u + count) * 4u;
        b0_i32[o] = int(k);
        b0_i32[o + 1u] = t;
        b0_i32[o + 2u] = skip;
        b0_i32[o + 3u] = 0;
      }
      ++count;
      predict(k);
    }
    ++symbols;
    t += skip;
    const bool again = skip == 0 && !(pc.D == 0u && k == blank);
    if (!again || symbols >= int(pc.max_symbols)) {
      if (symbols >= int(pc.max_symbols)) ++t;
      symbols = 0;
    }
  }
  // The loop leaves early only on a full buffer or a failed barrier; anything else means the
  // implementation cut the loops short (lavapipe ends a shader's loops after 65535 iterations in
  // all, counted over every loop), and the results must not be used.
  if (status == 0u && t < end && !full) status = 3u;
  grid_sync();  // every workgroup is done with the last joint's partials
  if (s_fail) status = 1u;
  for (uint e = gl_GlobalInvocationID.x; e < L * P; e += G * WG) {
    if (par == 1u) so[SO + e] = sf[HB + e];
    su[HB + e] = 0u;
  }
  if (lid < 8u) su[PART + ((lid / 4u) * G + wg) * 4u + lid % 4u] = 0u;
  if (wg == 0u && lid == 0u) {
    b0_i32[EM] = int(count);
    b0_i32[EM + 1u] = t;
    b0_i32[EM + 2u] = symbols;
  }
  if (lid == 0u && status != 0u) atomicMax(b0_u32[EM + 3u], status);
  if (lid == 0u && G > 1u) {
    memoryBarrierBuffer();
    if (atomicAdd(su[DONE], 1u) == G - 1u) {
      atomicExchange(su[ARRIVE], 0u);
      atomicExchange(su[DONE], 0u);
    }
  }
}
