// The weight rows of decode_block.comp (included there after its bindings, push constants and
// shared memory): dot products of W's rows with the staged vector for each weight dtype, plain
// (a group of rows at a time) and streamed (the next step requested before the current one is
// used, a stage's first step before the barrier ahead of it), and the stages' epilogues.

// ---- weights: which 0 wo (binding 6), 1 w_gate_up (8), 2 w_down (9), 3 w_qkv (2).
uint wdt(uint which) { return which == 0u ? DT_WO : which == 1u ? DT_WGU : which == 2u ? DT_WD : DT_WQ; }
uvec4 ld4(uint which, uint i) { return which == 0u ? wo4[i] : which == 1u ? wgu4[i] : which == 2u ? wd4[i] : wq4[i]; }
uint ld32(uint which, uint i) { return which == 0u ? wo32[i] : which == 1u ? wgu32[i] : which == 2u ? wd32[i] : wq32[i]; }
uint ld16(uint which, uint i) { return uint(which == 0u ? wo16[i] : which == 1u ? wgu16[i] : which == 2u ? wd16[i] : wq16[i]); }

float f16lo(uint u) { return unpackHalf2x16(u).x; }
float dot8h(uvec4 w, vec4 a, vec4 b) {
  return dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), a) + dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), b);
}
vec2 bf2(uint u) { return vec2(uintBitsToFloat(u << 16), uintBitsToFloat(u & 0xffff0000u)); }
float dot8b(uvec4 w, vec4 a, vec4 b) { return dot(vec4(bf2(w.x), bf2(w.y)), a) + dot(vec4(bf2(w.z), bf2(w.w)), b); }
// 1 + (4-bit field of q at bit s) / 16: the bits placed in a float's mantissa (exact).
float nib(uint q, uint s) { return uintBitsToFloat((((q >> s) & 15u) << 19) | 0x3F800000u); }
uint fun16(uint lo, uint hi) { return (lo >> 16) | (hi << 16); }

uint rr[RG];
float acc[RG];

// Staged x[32 b + 4 c .. + 4).
vec4 xq(uint b, uint c) { return sh4[swz(b * 8u + c)]; }

// Staged x of block b (8 slots) and its sum.
float stage_block(uint b, out vec4 xv[8]) {
  vec4 xs = vec4(0.0);
  [[unroll]] for (uint c = 0; c < 8u; ++c) {
    xv[c] = xq(b, c);
    xs += xv[c];
  }
  return (xs.x + xs.y) + (xs.z + xs.w);
}

// A q4_0 or q4_1 block . staged x: w holds its words (q4_0: the five 32-bit words covering its
// 18 bytes, mid when it starts 2 bytes into the first; q4_1: its five words, 4-byte aligned).
float q4_block_dot(uint dt, uint w[5], bool mid, vec4 xv[8], float xsum) {
  float s0 = 0.0, s1 = 0.0;
  [[unroll]] for (uint j = 0; j < 4u; ++j) {
    const uint q = dt == DT_Q4_1 || mid ? w[j + 1u] : fun16(w[j], w[j + 1u]);
    s0 += nib(q, 0u) * xv[j].x + nib(q, 8u) * xv[j].y + nib(q, 16u) * xv[j].z + nib(q, 24u) * xv[j].w;
    s1 += nib(q, 4u) * xv[4u + j].x + nib(q, 12u) * xv[4u + j].y + nib(q, 20u) * xv[4u + j].z + nib(q, 28u) * xv[4u + j].w;
  }
  if (dt == DT_Q4_0) {
    // sum (1 + q / 16) x = s, q4_0 values (q - 8) d: sum (q - 8) x = 16 s - 24 sum x.
    return f16lo(mid ? (w[0] >> 16) : (w[0] & 0xffffu)) * (16.0 * (s0 + s1) - 24.0 * xsum);
  }
  // q4_1 values d q + m: sum = d (16 s - 16 sum x) + m sum x.
  const vec2 dm = unpackHalf2x16(w[0]);
  return dm.x * (16.0 * (s0 + s1) - 16.0 * xsum) + dm.y * xsum;
}

// acc[r] = this lane's share of W[rr[r]] . staged x[0 .. K), W at element (or byte) offset off.
void dot_rows(uint which, uint off, uint K) {
  const uint dt = wdt(which);
  [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] = 0.0;
  if ((dt == DT_F16 || dt == DT_BF16) && (K & 7u) == 0u && (off & 7u) == 0u) {
    const uint n8 = K >> 3;
    for (uint c0 = lane; c0 < n8; c0 += SGS * U) {
      uvec4 w[RG][U];
      [[unroll]] for (uint r = 0; r < RG; ++r)
        [[unroll]] for (uint u = 0; u < U; ++u) {
          const uint c = min(c0 + u * SGS, n8 - 1u);
          w[r][u] = ld4(which, (off + rr[r] * K) / 8u + c);
        }
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint c = c0 + u * SGS;
        if (c < n8) {
          const vec4 a = sh4[swz(2u * c)], b = sh4[swz(2u * c + 1u)];
          [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] += dt == DT_F16 ? dot8h(w[r][u], a, b) : dot8b(w[r][u], a, b);
        }
      }
    }
  } else if (dt == DT_F32 && (K & 3u) == 0u && (off & 3u) == 0u) {
    const uint n4 = K >> 2;
    for (uint c0 = lane; c0 < n4; c0 += SGS * U) {
      uvec4 w[RG][U];
      [[unroll]] for (uint r = 0; r < RG; ++r)
        [[unroll]] for (uint u = 0; u < U; ++u) w[r][u] = ld4(which, (off + rr[r] * K) / 4u + min(c0 + u * SGS, n4 - 1u));
      [[unroll]] for (uint u = 0; u < U; ++u) {
        const uint c = c0 + u * SGS;
        if (c < n4) {
          const vec4 a = sh4[swz(c)];
          [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] += dot(uintBitsToFloat(w[r][u]), a);
        }
      }
    }
  } else if (dt == DT_Q4_0) {
    const uint nb = K >> 5;
    for (uint b0 = lane; b0 < nb; b0 += 2u * SGS) {
      uint w[RG][2][5];
      [[unroll]] for (uint r = 0; r < RG; ++r)
        [[unroll]] for (uint e = 0; e < 2u; ++e) {
          const uint a = off + (rr[r] * nb + min(b0 + e * SGS, nb - 1u)) * 18u;
          [[unroll]] for (uint j = 0; j < 5u; ++j) w[r][e][j] = ld32(which, (a >> 2) + j);
        }
      [[unroll]] for (uint e = 0; e < 2u; ++e) {
        const uint b = b0 + e * SGS;
        if (b >= nb) break;
        vec4 xv[8];
        const float xsum = stage_block(b, xv);
        [[unroll]] for (uint r = 0; r < RG; ++r)
          acc[r] += q4_block_dot(DT_Q4_0, w[r][e], ((off + (rr[r] * nb + b) * 18u) & 2u) != 0u, xv, xsum);
      }
    }
  } else if (dt == DT_Q4_1) {
    const uint nb = K >> 5;
    for (uint b = lane; b < nb; b += SGS) {
      uint w[RG][5];
      [[unroll]] for (uint r = 0; r < RG; ++r) {
        const uint a = off + (rr[r] * nb + b) * 20u;
        if ((a & 3u) == 0u) {
          [[unroll]] for (uint j = 0; j < 5u; ++j) w[r][j] = ld32(which, (a >> 2) + j);
        } else {
          [[unroll]] for (uint j = 0; j < 5u; ++j) w[r][j] = ld16(which, (a >> 1) + 2u * j) | (ld16(which, (a >> 1) + 2u * j + 1u) << 16);
        }
      }
      vec4 xv[8];
      const float xsum = stage_block(b, xv);
      [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] += q4_block_dot(DT_Q4_1, w[r], false, xv, xsum);
    }
  } else if (dt == DT_Q8_0) {
    const uint nb = K >> 5;
    for (uint b = lane; b < nb; b += SGS) {
      [[unroll]] for (uint r = 0; r < RG; ++r) {
        const uint h = (off + (rr[r] * nb + b) * 34u) >> 1;
        float s = 0.0;
        [[unroll]] for (uint j = 0; j < 16u; ++j) {
          const uint q = ld16(which, h + 1u + j);
          s += float(int(q << 24) >> 24) * shf(32u * b + 2u * j) + float(int(q << 16) >> 24) * shf(32u * b + 2u * j + 1u);
        }
        acc[r] += f16lo(ld16(which, h)) * s;
      }
    }
  } else {
    // Float rows not aligned for vector loads: an element at a time.
    for (uint k = lane; k < K; k += SGS) {
      [[unroll]] for (uint r = 0; r < RG; ++r) {
        const uint i = off + rr[r] * K + k;
        const float w = dt == DT_F32 ? uintBitsToFloat(ld32(which, i)) : dt == DT_F16 ? f16lo(ld16(which, i)) : uintBitsToFloat(ld16(which, i) << 16);
        acc[r] += w * shf(k);
      }
    }
  }
  [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] = subgroupAdd(acc[r]);
}

// Rows [0, N) of a projection in groups of RG over every subgroup of the grid; emit(n, dot) for
// each row. Written as a macro over the epilogue.
#define FOR_ROWS(N, WHICH, OFF, K, EMIT)                                              \
  {                                                                                   \
    const uint ngroups = ((N) + RG - 1u) / RG;                                        \
    for (uint grp = wg * nsg + sg; grp < ngroups; grp += G * nsg) {                   \
      [[unroll]] for (uint r = 0; r < RG; ++r) rr[r] = min(grp * RG + r, (N) - 1u);   \
      dot_rows(WHICH, OFF, K);                                                        \
      if (lane == 0u) {                                                               \
        [[unroll]] for (uint r = 0; r < RG; ++r) {                                    \
          const uint n = grp * RG + r;                                                \
          if (n < (N)) { EMIT }                                                       \
        }                                                                             \
      }                                                                               \
    }                                                                                 \
  }

// ---- Streamed rows (STREAM = 1; f16, bf16 and f32 rows that take 16-byte loads, q4_0, q4_1): a
// subgroup walks its row groups in steps (a step: each lane's UF 16-byte chunks or two blocks of
// each row), requesting the next step's weights before it computes on the current one, and a
// stage's first step before the grid barrier that precedes the stage (the weights do not depend
// on what the barrier waits for). Stages: 0 the output projection (rows 2g, 2g + 1), 1 gate-up
// (rows g and F + g: a unit), 2 down (rows 2g, 2g + 1), 3 QKV (rows 2g, 2g + 1).
layout(constant_id = 11) const uint STREAM = 1;
const uint UF = 2;
uvec4 fw[RG][UF], fwn[RG][UF];
uint qw[RG][2][5], qwn[RG][2][5];
uint rc[RG];
uint s_g, s_c;  // the step requested: its group, its first chunk

bool streams(uint which, uint off, uint K) {
  const uint dt = wdt(which);
  if (STREAM == 0u) return false;
  if (dt == DT_F16 || dt == DT_BF16) return (K & 7u) == 0u && (off & 7u) == 0u;
  if (dt == DT_F32) return (K & 3u) == 0u && (off & 3u) == 0u;
  return dt == DT_Q4_0 || (dt == DT_Q4_1 && (off & 3u) == 0u);
}
bool is_float(uint dt) { return dt == DT_F16 || dt == DT_BF16 || dt == DT_F32; }
// A row's chunks (16-byte float chunks, or blocks) and the chunks of one step over the subgroup.
uint chunks_of(uint which, uint K) {
  const uint dt = wdt(which);
  return dt == DT_F32 ? K >> 2 : is_float(dt) ? K >> 3 : K >> 5;
}
uint per_step(uint which) { return is_float(wdt(which)) ? UF * SGS : 2u * SGS; }

void rows_of(uint st, uint g, uint N) {
  if (st == 1u) {
    rr[0] = g;
    rr[1] = pc.F + g;
  } else {
    rr[0] = min(2u * g, N - 1u);
    rr[1] = min(2u * g + 1u, N - 1u);
  }
}

// Requests rows rr's chunks c0 + lane (+ SGS ...) into fwn / qwn.
void load_step(uint which, uint off, uint K, uint c0) {
  const uint dt = wdt(which), n = chunks_of(which, K);
  if (is_float(dt)) {
    const uint per = dt == DT_F32 ? 4u : 8u;
    [[unroll]] for (uint r = 0; r < RG; ++r)
      [[unroll]] for (uint u = 0; u < UF; ++u) fwn[r][u] = ld4(which, (off + rr[r] * K) / per + min(c0 + lane + u * SGS, n - 1u));
  } else {
    const uint bs = dt == DT_Q4_0 ? 18u : 20u;
    [[unroll]] for (uint r = 0; r < RG; ++r)
      [[unroll]] for (uint e = 0; e < 2u; ++e) {
        const uint a = off + (rr[r] * n + min(c0 + lane + e * SGS, n - 1u)) * bs;
        [[unroll]] for (uint j = 0; j < 5u; ++j) qwn[r][e][j] = ld32(which, (a >> 2) + j);
      }
  }
}

// acc += rows rc's chunks c0 + lane (+ SGS ...) from fw / qw against the staged x.
void use_step(uint which, uint off, uint K, uint c0) {
  const uint dt = wdt(which), n = chunks_of(which, K);
  if (is_float(dt)) {
    [[unroll]] for (uint u = 0; u < UF; ++u) {
      const uint c = c0 + lane + u * SGS;
      if (c < n) {
        if (dt == DT_F32) {
          const vec4 a = sh4[swz(c)];
          [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] += dot(uintBitsToFloat(fw[r][u]), a);
        } else {
          const vec4 a = sh4[swz(2u * c)], b = sh4[swz(2u * c + 1u)];
          [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] += dt == DT_F16 ? dot8h(fw[r][u], a, b) : dot8b(fw[r][u], a, b);
        }
      }
    }
    return;
  }
  [[unroll]] for (uint e = 0; e < 2u; ++e) {
    const uint b = c0 + lane + e * SGS;
    if (b < n) {
      vec4 xv[8];
      const float xsum = stage_block(b, xv);
      [[unroll]] for (uint r = 0; r < RG; ++r)
        acc[r] += q4_block_dot(dt, qw[r][e], dt == DT_Q4_0 && ((off + (rc[r] * n + b) * 18u) & 2u) != 0u, xv, xsum);
    }
  }
}

// The stage's first step, requested (before the barrier ahead of the stage).
void stream_begin(uint st, uint which, uint off, uint K, uint ngroups, uint N) {
  s_g = wg * nsg + sg;
  s_c = 0u;
  if (!streams(which, off, K) || s_g >= ngroups) return;
  rows_of(st, s_g, N);
  load_step(which, off, K, 0u);
}

void emit(uint st, uint g, uint N) {
  if (st == 1u) {
    sc[pc.off_s + HB + g] = acc[0] * silu(acc[1]);
    return;
  }
  [[unroll]] for (uint r = 0; r < RG; ++r) {
    const uint n = 2u * g + r;
    if (n >= N) break;
    if (st == 3u) sc[pc.off_s + QS + n] = acc[r];
    else if (st == 0u) sc[pc.off_s + X1 + n] = b1_f32[pc.off_x + n] + acc[r];
    else b0_f32[pc.off_y + n] = s_fail ? uintBitsToFloat(0x7fc00000u) : sc[pc.off_s + X1 + n] + acc[r];
  }
}

void stream_run(uint st, uint which, uint off, uint K, uint ngroups, uint N) {
  const uint n = chunks_of(which, K), ps = per_step(which), stride = G * nsg;
  while (s_g < ngroups) {
    const uint g = s_g, c0 = s_c;
    rc = rr;
    fw = fwn;
    qw = qwn;
    if (c0 == 0u) [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] = 0.0;
    s_c += ps;
    if (s_c >= n) {
      s_c = 0u;
      s_g += stride;
    }
    if (s_g < ngroups) {
      if (s_c == 0u) rows_of(st, s_g, N);
      load_step(which, off, K, s_c);
    }
    use_step(which, off, K, c0);
    if (c0 + ps >= n) {
      [[unroll]] for (uint r = 0; r < RG; ++r) acc[r] = subgroupAdd(acc[r]);
      if (lane == 0u) emit(st, g, N);
    }
  }
}
