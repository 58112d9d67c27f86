#include "kernels/cpu/quant_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <type_traits>
#include <utility>
#include <vector>
#include <cmath>

#include "kernels/cpu/avx2_util.h"
#include "runtime/base/cpu_features.h"

namespace vrun {

namespace {

// Per weight format: where the 32 quants live and the offset term. A block's contribution to a
// dot product is dw * dx * isum + c * sx, with isum the integer sum of (unsigned or signed)
// weight quants times activation quants, c = m (q4_1), -8 * dw (q4_0, whose quants are stored
// +8), 0 (q8_0, signed quants).
template <typename B>
struct WeightFormat;
template <>
struct WeightFormat<BlockQ4_1> {
  static float offset(const BlockQ4_1& b, float /*dw*/) { return f16_to_f32(b.m); }
};
template <>
struct WeightFormat<BlockQ4_0> {
  static float offset(const BlockQ4_0& /*b*/, float dw) { return -8.f * dw; }
};
template <>
struct WeightFormat<BlockQ8_0> {
  static float offset(const BlockQ8_0& /*b*/, float /*dw*/) { return 0.f; }
};

// The activation quants of element j as one integer: 128 * hi + lo (see BlockQ8Act).
inline int32_t act_q(const BlockQ8Act& x, int j) { return 128 * x.qs[j] + x.ql[j]; }

inline int32_t block_isum(const BlockQ4_1& b, const BlockQ8Act& x) {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) s += (b.qs[j] & 0x0f) * act_q(x, j) + (b.qs[j] >> 4) * act_q(x, j + 16);
  return s;
}
inline int32_t block_isum(const BlockQ4_0& b, const BlockQ8Act& x) {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) s += (b.qs[j] & 0x0f) * act_q(x, j) + (b.qs[j] >> 4) * act_q(x, j + 16);
  return s;
}
inline int32_t block_isum(const BlockQ8_0& b, const BlockQ8Act& x) {
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += b.qs[j] * act_q(x, j);
  return s;
}

template <typename B>
const B* wrow(const void* w, int64_t stride, int j) {
  return reinterpret_cast<const B*>(static_cast<const uint8_t*>(w) + stride * j);
}

template <typename B>
void tile_scalar(const void* w, int64_t ws, int nw, const BlockQ8Act* x, int64_t xs, int nx, int64_t nb, float* out,
                 int64_t ldo, bool with_offsets) {
  for (int j = 0; j < nw; ++j) {
    const B* wr = wrow<B>(w, ws, j);
    for (int i = 0; i < nx; ++i) {
      const BlockQ8Act* xr = x + xs * i;
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const float dw = f16_to_f32(wr[b].d);
        acc += dw * xr[b].d * static_cast<float>(block_isum(wr[b], xr[b]));
        if (with_offsets) acc += WeightFormat<B>::offset(wr[b], dw) * xr[b].s;
      }
      out[i * ldo + j] = acc;
    }
  }
}

// ---- AVX2 (+ AVX-512 VNNI) ----

#define VRUN_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

// The weight quants as 32 unsigned bytes in element order, and whether the activation's signs
// must absorb the weight's (q8_0: |w| * sign(x, w)).
template <typename B>
struct Unpack;
// q4_0 and q4_1 pack their quants alike: the low nibbles are elements 0..15, the high ones 16..31.
template <typename B>
struct UnpackNibbles {
  static constexpr bool kSigned = false;
  VRUN_AVX2 static inline __m256i load(const B& b) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
  }
};
template <>
struct Unpack<BlockQ4_1> : UnpackNibbles<BlockQ4_1> {};
template <>
struct Unpack<BlockQ4_0> : UnpackNibbles<BlockQ4_0> {};
template <>
struct Unpack<BlockQ8_0> {
  static constexpr bool kSigned = true;
  VRUN_AVX2 static inline __m256i load(const BlockQ8_0& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};

VRUN_AVX2 inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

VRUN_AVX2 inline float f16_scalar(uint16_t h) { return _cvtsh_ss(h); }

// Offset of a block as a float: q4_1's m, q4_0's -8 d (quants stored +8), none for q8_0.
template <typename B>
VRUN_AVX2 inline float block_offset(const B& b, float dw) {
  if constexpr (std::is_same_v<B, BlockQ4_1>)
    return f16_scalar(b.m);
  else if constexpr (std::is_same_v<B, BlockQ4_0>)
    return -8.f * dw;
  else
    return 0.f;
}

// One weight row against NX activation rows, two blocks per step into separate accumulators.
// Weight rows are visited one after another, so W streams through memory in address order:
// interleaving several rows (tiles over W) defeats the hardware prefetcher and made the 30 MB
// q8_0 output projection three times slower than a plain read of its bytes.
#define VRUN_ROW_STEP(u)                                                                  \
  {                                                                                       \
    const B& wb = wr[b + (u)];                                                            \
    const __m256i qw = Unpack<B>::load(wb);                                               \
    const float dw = f16_scalar(wb.d);                                                    \
    const float ow = block_offset<B>(wb, dw);                                             \
    __m256i uw = qw;                                                                      \
    if constexpr (Unpack<B>::kSigned) uw = _mm256_sign_epi8(qw, qw);                      \
    for (int i = 0; i < NX; ++i) {                                                        \
      const BlockQ8Act& xb = x[xs * i + b + (u)];                                         \
      __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));           \
      __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.ql));           \
      if constexpr (Unpack<B>::kSigned) {                                                 \
        qh = _mm256_sign_epi8(qh, qw);                                                    \
        ql = _mm256_sign_epi8(ql, qw);                                                    \
      }                                                                                   \
      const __m256 f = _mm256_cvtepi32_ps(DOT2(uw, qh, ql));                              \
      acc[i][u] = _mm256_fmadd_ps(_mm256_set1_ps(dw * xb.d), f, acc[i][u]);               \
      if (with_offsets) off[i] += ow * xb.s;                                              \
    }                                                                                     \
  }

#define VRUN_ROW_BODY                                                                     \
  const __m256i ones = _mm256_set1_epi16(1);                                              \
  (void)ones;                                                                             \
  for (int j = 0; j < nw; ++j) {                                                          \
    const B* wr = wrow<B>(w, ws, j);                                                      \
    __m256 acc[NX][2];                                                                    \
    float off[NX];                                                                        \
    for (int i = 0; i < NX; ++i) {                                                        \
      acc[i][0] = acc[i][1] = _mm256_setzero_ps();                                        \
      off[i] = 0;                                                                         \
    }                                                                                     \
    int64_t b = 0;                                                                        \
    for (; b + 2 <= nb; b += 2) {                                                         \
      VRUN_ROW_STEP(0)                                                                    \
      VRUN_ROW_STEP(1)                                                                    \
    }                                                                                     \
    if (b < nb) VRUN_ROW_STEP(0)                                                          \
    for (int i = 0; i < NX; ++i) out[i * ldo + j] = cpu::hsum8(_mm256_add_ps(acc[i][0], acc[i][1])) + off[i]; \
  }

template <typename B, int NX>
VRUN_AVX2 void rows_avx2(const void* w, int64_t ws, int nw, const BlockQ8Act* x, int64_t xs, int64_t nb, float* out,
                         int64_t ldo, bool with_offsets) {
#define DOT(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones)
#define DOT2(u, h, l) _mm256_add_epi32(_mm256_slli_epi32(DOT(u, h), 7), DOT(u, l))
  VRUN_ROW_BODY
#undef DOT2
#undef DOT
}

// vpdpbusd: no i16 saturation step and one instruction for maddubs + madd.
template <typename B, int NX>
VRUN_VNNI void rows_vnni(const void* w, int64_t ws, int nw, const BlockQ8Act* x, int64_t xs, int64_t nb, float* out,
                         int64_t ldo, bool with_offsets) {
#define DOT2(u, h, l) _mm256_dpbusd_epi32(_mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, h), 7), u, l)
  VRUN_ROW_BODY
#undef DOT2
}

// The integer sum of one q4_1 block (unpacked) times one activation block, as 8 lanes.
VRUN_VNNI inline __m256i q4_1_dot_vnni(__m256i uw, const BlockQ8Act& xb) {
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));
  const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.ql));
  return _mm256_dpbusd_epi32(_mm256_slli_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), uw, qh), 7), uw, ql);
}

// q4_1 weight rows against NX activation rows (decode; a batched step's rows), eight blocks per
// step: their integer sums are reduced to one vector of eight block sums, then scaled by eight
// (d, m) pairs (one gather: q4_1 blocks are 20 bytes, so no gathered word crosses a cache line)
// times eight activation scales in one multiply-add. Per block, the scalar scale, broadcast and
// conversion of the per-block path cost about as much as the dot product itself. Each activation
// row is summed exactly as it is alone (NX = 1): the weight blocks and their scales are loaded
// once for all NX rows. xd and xsum: row i's scales and block sums at i * 2 nb and i * 2 nb + nb.
template <int NX>
VRUN_VNNI void rows_q4_1_vnni(const void* w, int64_t ws, int nw, const BlockQ8Act* x, int64_t xs, const float* scales,
                              int64_t nb, float* out, int64_t ldo, bool with_offsets) {
  constexpr int s = static_cast<int>(sizeof(BlockQ4_1));
  const __m256i heads_at = _mm256_setr_epi32(0, s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s);
  for (int j = 0; j < nw; ++j) {
    const BlockQ4_1* wr = wrow<BlockQ4_1>(w, ws, j);
    __m256 acc[NX], off[NX];
    for (int i = 0; i < NX; ++i) acc[i] = off[i] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
      __m256i uw[8];
      for (int u = 0; u < 8; ++u) uw[u] = Unpack<BlockQ4_1>::load(wr[b + u]);
      const __m256i heads = _mm256_i32gather_epi32(reinterpret_cast<const int*>(wr + b), heads_at, 1);
      const __m256 dw = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(heads));
      const __m256 m = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(heads, 16)));
      for (int i = 0; i < NX; ++i) {
        const BlockQ8Act* xi = x + xs * i;
        const float* xd = scales + 2 * nb * i;
        __m256i v[8];
        for (int u = 0; u < 8; ++u) v[u] = q4_1_dot_vnni(uw[u], xi[b + u]);
        const __m256i t0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        const __m256i t1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
        const __m256i sums =
            _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20), _mm256_permute2x128_si256(t0, t1, 0x31));
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(dw, _mm256_loadu_ps(xd + b)), acc[i]);
        off[i] = _mm256_fmadd_ps(m, _mm256_loadu_ps(xd + nb + b), off[i]);
      }
    }
    for (int i = 0; i < NX; ++i) {
      const BlockQ8Act* xi = x + xs * i;
      const float* xd = scales + 2 * nb * i;
      float tail = 0;
      for (int64_t t = b; t < nb; ++t) {
        tail += f16_scalar(wr[t].d) * xd[t] * cpu::hsum8(_mm256_cvtepi32_ps(q4_1_dot_vnni(Unpack<BlockQ4_1>::load(wr[t]), xi[t])));
        if (with_offsets) tail += f16_scalar(wr[t].m) * xd[nb + t];
      }
      out[i * ldo + j] = cpu::hsum8(with_offsets ? _mm256_add_ps(acc[i], off[i]) : acc[i]) + tail;
    }
  }
}

using RowsFn = void (*)(const void*, int64_t, int, const BlockQ8Act*, int64_t, int64_t, float*, int64_t, bool);

template <typename B, bool kVnni, int... NXs>
constexpr std::array<RowsFn, kQuantTileX> rows_table(std::integer_sequence<int, NXs...>) {
  if constexpr (kVnni)
    return {&rows_vnni<B, NXs + 1>...};
  else
    return {&rows_avx2<B, NXs + 1>...};
}

enum class Isa { kScalar, kAvx2, kVnni };

Isa detect_isa() {
  __builtin_cpu_init();
  const bool avx2 = cpu_has_avx2();
  if (!avx2) return Isa::kScalar;
  if (__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    return Isa::kVnni;
  return Isa::kAvx2;
}

const Isa kIsa = detect_isa();
// A cap below the detected ISA, for tests of the narrower paths.
std::atomic<Isa> g_isa_cap{Isa::kVnni};

Isa active_isa() { return std::min(kIsa, g_isa_cap.load(std::memory_order_relaxed)); }

template <typename B>
void tile_dispatch(const void* w, int64_t ws, int nw, const BlockQ8Act* x, int64_t xs, int nx, int64_t nb, float* out,
                   int64_t ldo, bool with_offsets) {
  const Isa isa = active_isa();
  if (isa == Isa::kScalar) {
    tile_scalar<B>(w, ws, nw, x, xs, nx, nb, out, ldo, with_offsets);
    return;
  }
  if constexpr (std::is_same_v<B, BlockQ4_1>) {
    if (isa == Isa::kVnni) {
      // The activation scales and sums as arrays, for eight-block vector loads; up to four rows
      // at a time, each summed as it is alone.
      thread_local std::vector<float> scales;
      scales.resize(static_cast<size_t>(2 * nb * nx));
      for (int i = 0; i < nx; ++i)
        for (int64_t b = 0; b < nb; ++b) {
          scales[2 * nb * i + b] = x[xs * i + b].d;
          scales[2 * nb * i + nb + b] = x[xs * i + b].s;
        }
      using Fn = void (*)(const void*, int64_t, int, const BlockQ8Act*, int64_t, const float*, int64_t, float*, int64_t, bool);
      static constexpr Fn by_rows[4] = {&rows_q4_1_vnni<1>, &rows_q4_1_vnni<2>, &rows_q4_1_vnni<3>, &rows_q4_1_vnni<4>};
      for (int i0 = 0; i0 < nx; i0 += 4) {
        const int tx = std::min(4, nx - i0);
        by_rows[tx - 1](w, ws, nw, x + xs * i0, xs, scales.data() + 2 * nb * i0, nb, out + i0 * ldo, ldo, with_offsets);
      }
      return;
    }
  }
  static const auto avx2 = rows_table<B, false>(std::make_integer_sequence<int, kQuantTileX>{});
  static const auto vnni = rows_table<B, true>(std::make_integer_sequence<int, kQuantTileX>{});
  const auto& tab = isa == Isa::kVnni ? vnni : avx2;
  for (int i0 = 0; i0 < nx; i0 += kQuantTileX) {
    const int tx = std::min(kQuantTileX, nx - i0);
    tab[tx - 1](w, ws, nw, x + xs * i0, xs, nb, out + i0 * ldo, ldo, with_offsets);
  }
}

}  // namespace

namespace {

// The portable quantize_act_row, vectorised: same roundings (nearest, ties to even), so the
// same quants; only the block sum s may differ in its last bits (summation order).
VRUN_AVX2 void quantize_act_avx2(const float* x, BlockQ8Act* dst, int64_t nb) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  for (int64_t b = 0; b < nb; ++b) {
    __m256 v[4];
    for (int c = 0; c < 4; ++c) v[c] = _mm256_loadu_ps(x + b * 32 + 8 * c);
    const __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                   _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
    const float amax = hmax(m);
    const float sum = cpu::hsum8(_mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3])));
    const __m256 id = _mm256_set1_ps(amax != 0 ? 127.f / amax : 0.f);
    __m256i hi[4], lo[4];
    for (int c = 0; c < 4; ++c) {
      const __m256 t = _mm256_mul_ps(v[c], id);
      const __m256 h = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m256 l = _mm256_round_ps(_mm256_mul_ps(_mm256_sub_ps(t, h), _mm256_set1_ps(128.f)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      hi[c] = _mm256_cvtps_epi32(h);
      lo[c] = _mm256_cvtps_epi32(l);
    }
    // packs interleave 128-bit lanes; the final permute restores element order.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i qh = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(hi[0], hi[1]), _mm256_packs_epi32(hi[2], hi[3])), order);
    const __m256i ql = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(lo[0], lo[1]), _mm256_packs_epi32(lo[2], lo[3])), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst[b].qs), qh);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst[b].ql), ql);
    dst[b].d = amax / (127.f * 128.f);
    dst[b].s = sum;
  }
}

}  // namespace

void quantize_act_row(const float* x, BlockQ8Act* dst, int64_t k) {
  if (active_isa() != Isa::kScalar) {
    quantize_act_avx2(x, dst, k / 32);
    return;
  }
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0, sum = 0;
    for (int j = 0; j < 32; ++j) {
      amax = std::max(amax, std::fabs(v[j]));
      sum += v[j];
    }
    const float id = amax != 0 ? 127.f / amax : 0.f;
    for (int j = 0; j < 32; ++j) {
      // hi in [-127, 127]; the remainder v * id - hi lies in [-1/2, 1/2], so lo in [-64, 64].
      const float t = v[j] * id;
      const float hi = std::nearbyint(t);
      dst[b].qs[j] = static_cast<int8_t>(hi);
      dst[b].ql[j] = static_cast<int8_t>(std::nearbyint((t - hi) * 128.f));
    }
    dst[b].d = amax / (127.f * 128.f);
    dst[b].s = sum;
  }
}

void quant_dot_tile(DType wt, const void* w, int64_t w_stride, int nw, const BlockQ8Act* x, int64_t x_stride, int nx,
                    int64_t nblocks, float* out, int64_t ldo, bool with_offsets) {
  switch (wt) {
    case DType::q4_1: tile_dispatch<BlockQ4_1>(w, w_stride, nw, x, x_stride, nx, nblocks, out, ldo, with_offsets); break;
    case DType::q4_0: tile_dispatch<BlockQ4_0>(w, w_stride, nw, x, x_stride, nx, nblocks, out, ldo, with_offsets); break;
    case DType::q8_0: tile_dispatch<BlockQ8_0>(w, w_stride, nw, x, x_stride, nx, nblocks, out, ldo, with_offsets); break;
    default: break;
  }
}

const char* quant_dot_isa() {
  const Isa isa = active_isa();
  return isa == Isa::kVnni ? "avx512vnni" : isa == Isa::kAvx2 ? "avx2" : "scalar";
}

void quant_dot_force_scalar(bool on) { g_isa_cap.store(on ? Isa::kScalar : Isa::kVnni); }

void quant_dot_force_avx2(bool on) { g_isa_cap.store(on ? Isa::kAvx2 : Isa::kVnni); }

}  // namespace vrun
