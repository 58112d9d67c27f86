#version 450
// Tensor-core linear through GL_NV_cooperative_matrix2 with W as the A matrix: y = act(x W^T +
// bias) + res for W [N, K] of f16 or of q8_0, q4_0 or q4_1 blocks (GGUF layout in place, 32
// elements a block along K) and f16 or f32 x [M, K] (f32 rounded to halves as it loads), sums in
// f32. Each workgroup takes BM of W's rows and BN of x's: W loads as A, x as B through a
// transposed view, and the BM x BN tile of y^T is stored through a transposed view. For blocks,
// the driver loads W's tiles block by block and calls this kernel's decode function for each
// element, so they reach the tensor cores as halves with no copy of W (d * q (+ m) rounded to a
// half, as the subgroup-scope kernel's loads do). f16 W takes this kernel rather than
// matmul_cm2.comp (x as A) on wide projections, where it measured 8-17% faster on an H100
// (matmul_tiles.cpp, cm2_wa_tile). Edge tiles load and store through clamped layouts, and the last
// tile of x's rows moves inside M (SHIFT_LAST), as in matmul_cm2.comp. The host requires K % 8 == 0 (blocks: K % 32 == 0 and W's offset within its
// binding a whole number of blocks), 8-element-aligned rows and offsets, and for blocks the
// device's block loads with bufferDeviceAddress (Context::CoopMat2::block_loads).
// EXACT = 1 (a batched decode step's rows, linear's decode): f32 x is not rounded to halves but
// split into them, x = hi + lo / 2^11 with hi and lo halves (lo scaled up so that it stays a normal
// half), and so is W expanded from blocks (d * q needs up to 15 bits where a half holds 11); W of
// halves is exact as it is. The tensor cores then take hi W hi x into one f32 accumulator and hi W
// lo x + lo W hi x into another, added as acc + lo / 2^11 once K is walked: each product is exact
// in f32 and only lo W lo x (2^-22 of the sum's terms) is left out, so a row gets the f32 sums a
// one-row kernel computes up to their order, as the rows kernel (matmul_rows.comp) does, at the
// tensor cores' rate. |x| must stay below 65504 (the largest half).
// EXACT = 2 (q4_0 and q8_0 W, K steps of one block): W loads as its integers q, exact halves, with
// no lo part and one decode of the simplest kind; each step multiplies them by hi x and lo x into
// accumulators of its own, t = (q hi x) + (q lo x) / 2^11, and adds t times the block's scale d to
// the sum, as the one-row kernels scale each block's integer dot product.
// Bindings: 0 y, 1 x, 2 W, 3 bias, 4 residual; 5, 6 for split K (matmul_cm2_common.glsl).
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
#include "matmul_cm2_common.glsl"

layout(constant_id = 10) const uint DT_W = DT_Q4_0;
layout(constant_id = 12) const uint EXACT = 0;
const float LO_SCALE = 2048.0;

// The blocks as 16-bit words: the scale d (and q4_1's minimum m) as f16 bits, then the quants.
struct BlockQ8_0 {
  uint16_t d;
  uint16_t q[16];  // element j is byte j (signed)
};
struct BlockQ4_0 {
  uint16_t d;
  uint16_t q[8];  // element j is the low nibble of byte j, element j + 16 its high nibble
};
struct BlockQ4_1 {
  uint16_t d, m;
  uint16_t q[8];
};
layout(set = 0, binding = 2, std430) readonly buffer WQ8_0 { BlockQ8_0 w_q8_0[]; };
layout(set = 0, binding = 2, std430) readonly buffer WQ4_0 { BlockQ4_0 w_q4_0[]; };
layout(set = 0, binding = 2, std430) readonly buffer WQ4_1 { BlockQ4_1 w_q4_1[]; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RefQ8_0 { BlockQ8_0 b; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RefQ4_0 { BlockQ4_0 b; };
layout(buffer_reference, std430, buffer_reference_align = 2) buffer RefQ4_1 { BlockQ4_1 b; };

float f16_bits(const uint h) { return unpackHalf2x16(h).x; }

// Element j of a block: its integer q (q4_0: the nibble less 8; exact in a half) and its value
// d q (+ m) in f32 (d q exact: d is a half and q has at most 8 bits; q4_1's + m rounded once, as
// the one-row kernels round it).
// The nibble of element j in a 4-bit block's 16-bit word: byte j % 16, the high half past 16.
uint nibble(const uint w, const uint j) { return (w >> (8u * (j & 1u) + 4u * (j >> 4))) & 15u; }
float q8_0_int(const in RefQ8_0 r, const uint j) { return float(int(uint(r.b.q[j >> 1]) << (24u - 8u * (j & 1u))) >> 24); }
float q4_0_int(const in RefQ4_0 r, const uint j) { return float(nibble(uint(r.b.q[(j & 15u) >> 1]), j)) - 8.0; }
float q8_0_f(const in RefQ8_0 r, const uint j) { return f16_bits(uint(r.b.d)) * q8_0_int(r, j); }
float q4_0_f(const in RefQ4_0 r, const uint j) { return f16_bits(uint(r.b.d)) * q4_0_int(r, j); }
float q4_1_f(const in RefQ4_1 r, const uint j) {
  return f16_bits(uint(r.b.d)) * float(nibble(uint(r.b.q[(j & 15u) >> 1]), j)) + f16_bits(uint(r.b.m));
}

// Decode functions: element at[1] of the block (block coordinates unused: the block's address
// says it all) as a half, rounded; EXACT = 1: its hi and lo parts; EXACT = 2: its integer.
float16_t decode_q8_0(const in RefQ8_0 r, const in uint blk[2], const in uint at[2]) { return float16_t(q8_0_f(r, at[1])); }
float16_t decode_q4_0(const in RefQ4_0 r, const in uint blk[2], const in uint at[2]) { return float16_t(q4_0_f(r, at[1])); }
float16_t decode_q4_1(const in RefQ4_1 r, const in uint blk[2], const in uint at[2]) { return float16_t(q4_1_f(r, at[1])); }

// EXACT's split of a float v: hi, v with its 13 lowest mantissa bits cleared (a half's 11
// significant bits), and lo = (v - hi) * LO_SCALE, both halves (lo rounded to one). Bit masks
// rather than conversions back and forth, which a compiler may treat as the identity.
float hi_part(const float v) { return uintBitsToFloat(floatBitsToUint(v) & 0xFFFFE000u); }
float lo_part(const float v) { return (v - hi_part(v)) * LO_SCALE; }
float16_t decode_q8_0_hi(const in RefQ8_0 r, const in uint blk[2], const in uint at[2]) { return float16_t(hi_part(q8_0_f(r, at[1]))); }
float16_t decode_q8_0_lo(const in RefQ8_0 r, const in uint blk[2], const in uint at[2]) { return float16_t(lo_part(q8_0_f(r, at[1]))); }
float16_t decode_q4_0_hi(const in RefQ4_0 r, const in uint blk[2], const in uint at[2]) { return float16_t(hi_part(q4_0_f(r, at[1]))); }
float16_t decode_q4_0_lo(const in RefQ4_0 r, const in uint blk[2], const in uint at[2]) { return float16_t(lo_part(q4_0_f(r, at[1]))); }
float16_t decode_q4_1_hi(const in RefQ4_1 r, const in uint blk[2], const in uint at[2]) { return float16_t(hi_part(q4_1_f(r, at[1]))); }
float16_t decode_q4_1_lo(const in RefQ4_1 r, const in uint blk[2], const in uint at[2]) { return float16_t(lo_part(q4_1_f(r, at[1]))); }
float16_t decode_q8_0_q(const in RefQ8_0 r, const in uint blk[2], const in uint at[2]) { return float16_t(q8_0_int(r, at[1])); }
float16_t decode_q4_0_q(const in RefQ4_0 r, const in uint blk[2], const in uint at[2]) { return float16_t(q4_0_int(r, at[1])); }
// EXACT = 2 (a coopMatPerElementNV callback): a step's sums t times the scale of W row n0 + r's
// block kb.
float block_scale(const in uint r, const in uint c, const in float e, const in uint n0, const in uint kb) {
  const uint n = min(n0 + r, pc.N - 1u);
  if (DT_W == DT_Q8_0) return e * f16_bits(uint(w_q8_0[pc.off_b / 34u + n * (pc.K / 32u) + kb].d));
  return e * f16_bits(uint(w_q4_0[pc.off_b / 18u + n * (pc.K / 32u) + kb].d));
}
// coopMatPerElementNV callbacks: x's split, element by element.
float x_hi(const in uint r, const in uint c, const in float e) { return hi_part(e); }
float x_lo(const in uint r, const in uint c, const in float e) { return lo_part(e); }

#define MAT_W coopmat<float16_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA>
#define MAT_XF coopmat<float, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>
#define MAT_X coopmat<float16_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB>

// bias, act, residual at tile element (r, c) of the y^T tile whose corner is (n0, m0).
float epilogue(const in uint r, const in uint c, const in float e, const in uint n0, const in uint m0) {
  return epilogue_mn(m0 + c, n0 + r, e);
}

// EXACT: x's tile at k through layout LX, loaded in f32 and split into halves b (hi) and bl (lo).
#define LOAD_X_SPLIT(LX, k)                                                                          \
  MAT_XF bf, bhf, blf;                                                                               \
  coopMatLoadTensorNV(bf, b1_f32, pc.off_a, sliceTensorLayoutNV(LX, m0, BN, k, BK), transposed);      \
  coopMatPerElementNV(bhf, bf, x_hi);                                                                \
  coopMatPerElementNV(blf, bf, x_lo);                                                                \
  const MAT_X b = MAT_X(bhf);                                                                        \
  const MAT_X bl = MAT_X(blf);

// One K step at k through layouts LW / LX: acc += W[n0 .., k ..] x[m0 .., k ..]^T (EXACT: the
// split products, into acc and lo).
#define STEP(LW, LX, k)                                                                                  \
  if (EXACT == 2u) {                                                                                     \
    MAT_W q;                                                                                             \
    if (DT_W == DT_Q8_0)                                                                                 \
      coopMatLoadTensorNV(q, w_q8_0, pc.off_b / 34u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q8_0_q); \
    else                                                                                                 \
      coopMatLoadTensorNV(q, w_q4_0, pc.off_b / 18u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q4_0_q); \
    LOAD_X_SPLIT(LX, k)                                                                                  \
    ACC t = coopMatMulAdd(q, b, ACC(0.0));                                                               \
    const ACC tl = coopMatMulAdd(q, bl, ACC(0.0));                                                       \
    t = t + tl * (1.0 / LO_SCALE);                                                                       \
    coopMatPerElementNV(t, t, block_scale, n0, (k) / 32u);                                               \
    acc = acc + t;                                                                                       \
  } else if (EXACT != 0u) {                                                                              \
    MAT_W a, al;                                                                                         \
    if (DT_W == DT_F16) {                                                                                \
      coopMatLoadTensorNV(a, b2_f16, pc.off_b, sliceTensorLayoutNV(LW, n0, BM, k, BK));                   \
    } else if (DT_W == DT_Q8_0) {                                                                        \
      coopMatLoadTensorNV(a, w_q8_0, pc.off_b / 34u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q8_0_hi); \
      coopMatLoadTensorNV(al, w_q8_0, pc.off_b / 34u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q8_0_lo); \
    } else if (DT_W == DT_Q4_0) {                                                                        \
      coopMatLoadTensorNV(a, w_q4_0, pc.off_b / 18u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q4_0_hi); \
      coopMatLoadTensorNV(al, w_q4_0, pc.off_b / 18u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q4_0_lo); \
    } else {                                                                                             \
      coopMatLoadTensorNV(a, w_q4_1, pc.off_b / 20u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q4_1_hi); \
      coopMatLoadTensorNV(al, w_q4_1, pc.off_b / 20u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q4_1_lo); \
    }                                                                                                    \
    LOAD_X_SPLIT(LX, k)                                                                                  \
    acc = coopMatMulAdd(a, b, acc);                                                                      \
    lo = coopMatMulAdd(a, bl, lo);                                                                       \
    if (DT_W != DT_F16) lo = coopMatMulAdd(al, b, lo);                                                   \
  } else {                                                                                               \
    MAT_W a;                                                                                             \
    if (DT_W == DT_F16)                                                                                  \
      coopMatLoadTensorNV(a, b2_f16, pc.off_b, sliceTensorLayoutNV(LW, n0, BM, k, BK));                   \
    else if (DT_W == DT_Q8_0)                                                                            \
      coopMatLoadTensorNV(a, w_q8_0, pc.off_b / 34u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q8_0); \
    else if (DT_W == DT_Q4_0)                                                                            \
      coopMatLoadTensorNV(a, w_q4_0, pc.off_b / 18u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q4_0); \
    else                                                                                                 \
      coopMatLoadTensorNV(a, w_q4_1, pc.off_b / 20u, sliceTensorLayoutNV(LW, n0, BM, k, BK), decode_q4_1); \
    MAT_X b;                                                                                             \
    if (DT_A == DT_F32) {                                                                                \
      coopmat<float, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> bf;                                       \
      coopMatLoadTensorNV(bf, b1_f32, pc.off_a, sliceTensorLayoutNV(LX, m0, BN, k, BK), transposed);      \
      b = MAT_X(bf);                                                                                     \
    } else {                                                                                             \
      coopMatLoadTensorNV(b, b1_f16, pc.off_a, sliceTensorLayoutNV(LX, m0, BN, k, BK), transposed);       \
    }                                                                                                    \
    acc = coopMatMulAdd(a, b, acc);                                                                      \
  }

void main() {
  const uint n0 = gl_WorkGroupID.x * BM;
  uint m0 = gl_WorkGroupID.y * BN;
  if (SHIFT_LAST != 0u && m0 + BN > pc.M) m0 = pc.M - BN;
  const uint K = pc.K, kbeg = k_begin(K), kend = k_end(K);
  const uint a_sm = pc.a_sm & ~7u, kb = K / 32u;  // x's rows 8-element aligned; W's in blocks
  tensorViewNV<2, false, 1, 0> transposed = createTensorViewNV(2, false, 1, 0);
  ACC acc = ACC(0.0), lo = ACC(0.0);

  // Layouts of W (blocks of 1 x 32 for block types) and of x, unclamped or clamped by type.
#define W_LAYOUT(l)                                                     \
  if (DT_W != DT_F16) l = setTensorLayoutBlockSizeNV(l, 1, 32);         \
  l = setTensorLayoutDimensionNV(l, pc.N, K);                           \
  l = setTensorLayoutStrideNV(l, DT_W == DT_F16 ? (K & ~7u) : kb, 1);
#define X_LAYOUT(l)                          \
  l = setTensorLayoutDimensionNV(l, pc.M, K); \
  l = setTensorLayoutStrideNV(l, a_sm, 1);
  // A tile past x's last row clamps only x's loads: W's rows are all there, and W's loads through
  // a clamped layout (a block decode per element) measured 3-4x slower on an H100, which made a
  // 481-row q4_0 prefill take twice the time of a 512-row one.
  if (n0 + BM <= pc.N && K % BK == 0u) {
    tensorLayoutNV<2> lw = createTensorLayoutNV(2);
    W_LAYOUT(lw)
    if (m0 + BN <= pc.M) {
      tensorLayoutNV<2> lx = createTensorLayoutNV(2);
      X_LAYOUT(lx)
      K_LOOP(lw, lx)
    } else {
      tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
          createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
      X_LAYOUT(lx)
      K_LOOP(lw, lx)
    }
  } else {
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lw =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> lx =
        createTensorLayoutNV(2, gl_CooperativeMatrixClampModeConstantNV);
    W_LAYOUT(lw)
    X_LAYOUT(lx)
    for (uint k = kbeg; k < kend; k += BK) STEP(lw, lx, k)
  }

  if (EXACT == 1u) acc = acc + lo * (1.0 / LO_SCALE);
  SPLIT_MERGE(acc)
  if (DT_BIAS != DT_NONE || ACT != 0u || DT_RES != DT_NONE) coopMatPerElementNV(acc, acc, epilogue, n0, m0);
  tensorLayoutNV<2, gl_CooperativeMatrixClampModeConstantNV> ly = y_layout();
  if (DT_Y == DT_F16) {
    coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> y16 =
        coopmat<float16_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
    coopMatStoreTensorNV(y16, b0_f16, pc.off_y, sliceTensorLayoutNV(ly, m0, BN, n0, BM), transposed);
  } else {
    coopMatStoreTensorNV(acc, b0_f32, pc.off_y, sliceTensorLayoutNV(ly, m0, BN, n0, BM), transposed);
  }
}
