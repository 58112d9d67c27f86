// Body of the cooperative-matrix (tensor core) flash-attention kernel for f16 or f32 Q, K, V with
// head dims up to DMAX (64 or 128; rows start at multiples of 8 elements: the host checks). f32
// operands are rounded to f16 as they are staged (the tensor cores multiply halves; scores, the
// softmax and the output accumulate in f32), so f32 activations need no separate cast pass. The NV and KHR variants
// define the matrix types and load/store/multiply macros, then include this.
// A workgroup of 4 subgroups (32 invocations each) owns BQ = 64 query rows of one head, 16 per
// subgroup; its Q rows stay in registers as A fragments. Keys go by in tiles of BKV = 32 staged in
// shared memory as 16-byte words of f16 (one store per 8 halves, as the linear kernel does); the
// next tile's global loads are issued before the current tile's multiplies. S = Q K^T per
// subgroup (16 x 32, f32 accumulators) goes through shared memory, where two invocations per row
// apply scale, masks and the causal limit and run the online softmax; P (f16) then multiplies the
// V tile into f32 output accumulators. Those are rescaled by each row's correction through a
// matrix of per-row factors loaded with the accumulators' own layout, so element e of both
// belongs to the same row whatever the device's fragment layout. Tiles past the causal limit of
// the block's last row are skipped. An additive or boolean mask (Parakeet's relative-position
// term: a float per score) is read one tile ahead into registers, lane = key, so each load reads
// 32 consecutive keys of one row (coalesced), and is applied to the subgroup's scores in shared
// memory before the softmax reads them; its latency hides behind the tile's multiplies.
// Split keys (SPLIT = 1, few row blocks: Parakeet's 8 heads would otherwise leave the GPU half
// idle): grid z = B * nsplit, each workgroup takes kchunk keys (a multiple of BKV) and writes its
// rows' unnormalised partials (output, max, sum) as f32 [rows, nsplit, Dv + 2] to binding 0, for
// sdpa_combine.comp to merge. With a window a block walks (and splits) only the union of its
// rows' bands, from its first row's first key to its last row's last.
// Same push constants and bindings as sdpa.comp (0 y, 1 q, 2 k, 3 v, 4 mask).

layout(local_size_x = 128) in;
layout(constant_id = 0) const uint DT_Y = 0;
layout(constant_id = 1) const uint DT_MASK = DT_NONE;
layout(constant_id = 2) const uint CAUSAL = 0;
layout(constant_id = 3) const uint DMAX = 128;
layout(constant_id = 4) const uint DT_Q = DT_F16;
layout(constant_id = 5) const uint DT_K = DT_F16;
layout(constant_id = 6) const uint DT_V = DT_F16;
layout(constant_id = 7) const uint SPLIT = 0;
// 1: local attention (push win_l / win_r): row i at position p = Lk - Lq + i sees keys
// p - win_l .. p + win_r, its mask in band coordinates (column j - (p - win_l)).
layout(constant_id = 8) const uint WINDOW = 0;

layout(set = 0, binding = 1, std430) buffer BufQ4 { uvec4 q4[]; };
layout(set = 0, binding = 2, std430) buffer BufK4 { uvec4 k4[]; };
layout(set = 0, binding = 3, std430) buffer BufV4 { uvec4 v4[]; };
layout(set = 0, binding = 1, std430) buffer BufQF4 { vec4 qf4[]; };
layout(set = 0, binding = 2, std430) buffer BufKF4 { vec4 kf4[]; };
layout(set = 0, binding = 3, std430) buffer BufVF4 { vec4 vf4[]; };

uvec4 pack8(vec4 lo, vec4 hi) {
  return uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw));
}
// Eight elements from element e (a multiple of 8) as packed halves.
uvec4 q8(uint e) { return DT_Q == DT_F32 ? pack8(qf4[e / 4u], qf4[e / 4u + 1u]) : q4[e / 8u]; }
uvec4 k8(uint e) { return DT_K == DT_F32 ? pack8(kf4[e / 4u], kf4[e / 4u + 1u]) : k4[e / 8u]; }
uvec4 v8(uint e) { return DT_V == DT_F32 ? pack8(vf4[e / 4u], vf4[e / 4u + 1u]) : v4[e / 8u]; }

#include "sdpa_common.glsl"
layout(push_constant) uniform Push {
  SDPA_PUSH_FIELDS
} pc;

const uint WG = 128, NW = 4, BQ = 64, BKV = 32;
const uint ND = DMAX / 16u;        // 16-wide fragments across the head dims
const uint C8 = DMAX / 8u;         // 16-byte words per staged row
const uint PER = BKV * C8 / WG;    // words per invocation per tile and operand
const uint LDH4 = C8 + 1u;         // padded row strides (16-byte words / floats) against bank
const uint LDP4 = BKV / 8u + 1u;   // conflicts
const uint LDS = BKV + 4u;
const float NEG_INF = -1.0 / 0.0;
shared uvec4 Ks[BKV * LDH4];       // K tile [key][dim]; first used to stage Q
shared uvec4 Vs[BKV * LDH4];       // V tile [key][dim]
shared uvec4 Ps[NW * 16 * LDP4];   // per subgroup: P [row][key] as f16
shared float Sf[NW * 16 * LDS];    // per subgroup: scores, then output fragments
shared float Cb[NW * 256];         // per subgroup: row factors broadcast along 16 columns
shared float Ls[BQ];

// The mask of row r0 + u (mrow: row r0's mask) at key jj, 0 where there is none: past the rows
// or the keys, or (with a window) outside the row's band, whose columns the mask holds.
float mask_at(uint r0, uint mrow, uint u, uint jj, uint kend) {
  uint ii = r0 + u, col = jj;
  if (WINDOW == 1) {
    col = jj - (pc.Lk - pc.Lq + ii - pc.win_l);
    if (col >= pc.win_l + pc.win_r + 1u) return 0.0;
  }
  return ii < pc.Lq && jj < kend ? load4(DT_MASK, mrow + u * pc.m_sl + col * pc.m_sk) : 0.0;
}

void main() {
  uint t = gl_LocalInvocationID.x;
  uint w = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  // Blocks of late rows see the most keys under a causal mask: start them first.
  uint blk = gl_NumWorkGroups.x - 1u - gl_WorkGroupID.x;
  uint i0 = blk * BQ, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z / pc.nsplit, split = gl_WorkGroupID.z % pc.nsplit;
  uint hk = h / (pc.Hq / pc.Hkv);
  uint qo = pc.off_q + b * pc.q_sb + h * pc.q_sh;
  uint ko = pc.off_k + b * pc.k_sb + hk * pc.k_sh;
  uint vo = pc.off_v + b * pc.v_sb + hk * pc.v_sh;

  // Q fragments, staged 32 rows at a time through the K tile.
  A_T qa[ND];
  [[unroll]] for (uint half_ = 0; half_ < 2u; ++half_) {
    barrier();
    [[unroll]] for (uint p = 0; p < PER; ++p) {
      uint e = t + p * WG, rr = e / C8, c = e % C8, i = i0 + half_ * 32u + rr;
      Ks[rr * LDH4 + c] = (i < pc.Lq && c * 8u < HEAD_D) ? q8(qo + i * pc.q_sl + c * 8u) : uvec4(0);
    }
    barrier();
    if (w / 2u == half_)
      [[unroll]] for (uint kd = 0; kd < ND; ++kd) LOAD_A(qa[kd], Ks, (w % 2u) * 16u * LDH4 + kd * 2u, LDH4);
  }

  // Softmax ownership: two invocations per row, 16 keys of the tile each.
  uint rl = lane / 2u, c0 = (lane % 2u) * 16u;
  uint i = i0 + w * 16u + rl;
  bool row_ok = i < pc.Lq;
  uint last = min(pc.Lq, i0 + BQ) - 1u;
  uint kend = pc.Lk;
  if (CAUSAL == 1) kend = min(pc.Lk, pc.Lk - pc.Lq + last + 1u);
  const uint width = pc.win_l + pc.win_r + 1u;
  uint kfirst = 0u;
  if (WINDOW == 1) {
    kfirst = band_begin(pc.Lq, pc.Lk, pc.win_l, int(i0));
    kend = min(kend, band_end(pc.Lq, pc.Lk, pc.win_r, int(last)));
  }
  // This workgroup's keys: [kbeg, kend).
  const uint kbeg = min(kend, kfirst + split * pc.kchunk);
  kend = min(kend, kbeg + pc.kchunk);
  uint klim = CAUSAL == 1 ? pc.Lk - pc.Lq + i + 1u : pc.Lk;
  // Row i's band starts at key wlo (as uint: key jj is in it when jj - wlo < width, which is its
  // mask column).
  uint wlo = pc.Lk - pc.Lq + i - pc.win_l;

  C_T o[ND];
  [[unroll]] for (uint f = 0; f < ND; ++f) o[f] = C_T(0.0);
  float m = NEG_INF, l = 0.0;

  // Words of a K/V tile: rows past the keys and dims past D / Dv are zeros, so padding adds
  // nothing and no garbage (inf/nan) meets a zero weight.
  // The mask of the subgroup's 16 rows at key j + lane of the next tile (0 where not read).
  float mk[16];
  const uint mrow = pc.off_m + b * pc.m_sb + h * pc.m_sh + (i0 + w * 16u) * pc.m_sl;
  if (DT_MASK != DT_NONE)
    [[unroll]] for (uint u = 0; u < 16u; ++u) mk[u] = mask_at(i0 + w * 16u, mrow, u, kbeg + lane, kend);
  uvec4 rk[PER], rv[PER];
  [[unroll]] for (uint p = 0; p < PER; ++p) {
    uint e = t + p * WG, j = kbeg + e / C8, c = e % C8;
    rk[p] = (j < kend && c * 8u < HEAD_D) ? k8(ko + j * pc.k_sl + c * 8u) : uvec4(0);
    rv[p] = (j < kend && c * 8u < HEAD_DV) ? v8(vo + j * pc.v_sl + c * 8u) : uvec4(0);
  }

  for (uint j0 = kbeg; j0 < kend; j0 += BKV) {
    uint n = min(BKV, kend - j0);
    barrier();  // the previous tile's multiplies are done with Ks / Vs
    [[unroll]] for (uint p = 0; p < PER; ++p) {
      uint e = t + p * WG, at = (e / C8) * LDH4 + e % C8;
      Ks[at] = rk[p];
      Vs[at] = rv[p];
    }
    barrier();
    uint j1 = j0 + BKV;
    if (j1 < kend) {
      [[unroll]] for (uint p = 0; p < PER; ++p) {
        uint e = t + p * WG, j = j1 + e / C8, c = e % C8;
        rk[p] = (j < kend && c * 8u < HEAD_D) ? k8(ko + j * pc.k_sl + c * 8u) : uvec4(0);
        rv[p] = (j < kend && c * 8u < HEAD_DV) ? v8(vo + j * pc.v_sl + c * 8u) : uvec4(0);
      }
    }

    [[unroll]] for (uint f = 0; f < BKV / 16u; ++f) {
      C_T sacc = C_T(0.0);
      [[unroll]] for (uint kd = 0; kd < ND; ++kd) {
        B_T kb;
        LOAD_B_COL(kb, Ks, f * 16u * LDH4 + kd * 2u, LDH4);
        sacc = MMA(qa[kd], kb, sacc);
      }
      STORE_C(sacc, Sf, w * 16u * LDS + f * 16u, LDS);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    if (DT_MASK != DT_NONE) {
      // Scale and mask the scores in place, row u at key lane; then the next tile's mask.
      [[unroll]] for (uint u = 0; u < 16u; ++u) {
        uint at = (w * 16u + u) * LDS + lane;
        float a = Sf[at] * pc.scale;
        if (DT_MASK == DT_BOOL || DT_MASK == DT_U8) a = mk[u] != 0.0 ? a : NEG_INF;
        else a += mk[u];
        Sf[at] = a;
      }
      if (j0 + BKV < kend)
        [[unroll]] for (uint u = 0; u < 16u; ++u) mk[u] = mask_at(i0 + w * 16u, mrow, u, j0 + BKV + lane, kend);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
    }

    float s[16];
    float mt = NEG_INF;
    [[unroll]] for (uint u = 0; u < 16u; ++u) {
      uint j = c0 + u, jj = j0 + j;
      float a = Sf[(w * 16u + rl) * LDS + j];
      if (DT_MASK == DT_NONE) a *= pc.scale;
      if (!row_ok || j >= n || jj >= klim || (WINDOW == 1 && jj - wlo >= width)) a = NEG_INF;
      s[u] = a;
      mt = max(mt, a);
    }
    mt = max(mt, subgroupShuffleXor(mt, 1u));
    float mn = max(m, mt);
    // A row with every key so far masked keeps m = -inf; exp(-inf - -inf) would be nan.
    float corr = mn == NEG_INF ? 1.0 : exp(m - mn);
    float sum = 0.0;
    uint packed[8];
    [[unroll]] for (uint u = 0; u < 16u; u += 2u) {
      vec2 p = vec2(s[u] == NEG_INF ? 0.0 : exp(s[u] - mn), s[u + 1u] == NEG_INF ? 0.0 : exp(s[u + 1u] - mn));
      packed[u / 2u] = packHalf2x16(p);
      // The sum takes P as rounded for the multiply, so numerator and denominator agree.
      p = unpackHalf2x16(packed[u / 2u]);
      sum += p.x + p.y;
    }
    uint pat = (w * 16u + rl) * LDP4 + c0 / 8u;
    Ps[pat] = uvec4(packed[0], packed[1], packed[2], packed[3]);
    Ps[pat + 1u] = uvec4(packed[4], packed[5], packed[6], packed[7]);
    sum += subgroupShuffleXor(sum, 1u);
    l = l * corr + sum;
    m = mn;
    [[unroll]] for (uint e = 0; e < 8u; ++e) Cb[w * 256u + rl * 16u + (lane % 2u) * 8u + e] = corr;
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    C_T cm;
    LOAD_C(cm, Cb, w * 256u, 16u);
    [[unroll]] for (uint f = 0; f < ND; ++f)
      [[unroll]] for (int e = 0; e < o[f].length(); ++e) o[f][e] *= cm[e];
    [[unroll]] for (uint kf = 0; kf < BKV / 16u; ++kf) {
      A_T pa;
      LOAD_A(pa, Ps, w * 16u * LDP4 + kf * 2u, LDP4);
      [[unroll]] for (uint f = 0; f < ND; ++f) {
        B_T vb;
        LOAD_B_ROW(vb, Vs, kf * 16u * LDH4 + f * 2u, LDH4);
        o[f] = MMA(pa, vb, o[f]);
      }
    }
  }

  if (lane % 2u == 0u) Ls[w * 16u + rl] = l;
  if (SPLIT == 1 && lane % 2u == 0u && row_ok) {
    const uint po = pc.off_y + (((b * pc.Hq + h) * pc.Lq + i) * pc.nsplit + split) * (HEAD_DV + 2u);
    b0_f32[po + HEAD_DV] = m;
    b0_f32[po + HEAD_DV + 1u] = l;
  }
  [[unroll]] for (uint f = 0; f < ND; ++f) {
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    STORE_C(o[f], Sf, w * 16u * LDS, LDS);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = lane; e < 256u; e += 32u) {
      uint r = e / 16u, d = f * 16u + e % 16u, ii = i0 + w * 16u + r;
      if (ii < pc.Lq && d < HEAD_DV) {
        if (SPLIT == 1) {
          b0_f32[pc.off_y + (((b * pc.Hq + h) * pc.Lq + ii) * pc.nsplit + split) * (HEAD_DV + 2u) + d] = Sf[(w * 16u + r) * LDS + e % 16u];
          continue;
        }
        float ll = Ls[w * 16u + r];
        // Rows whose every key is masked output zeros, as the CPU kernel does.
        float y = ll > 0.0 ? Sf[(w * 16u + r) * LDS + e % 16u] / ll : 0.0;
        store0(DT_Y, pc.off_y + ((b * pc.Hq + h) * pc.Lq + ii) * HEAD_DV + d, y);
      }
    }
  }
}
