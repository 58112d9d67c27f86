#include "kernels/cpu/quant_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <type_traits>
#include <utility>
#include <cmath>

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

inline int32_t block_isum(const BlockQ4_1& b, const int8_t* q) {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) s += (b.qs[j] & 0x0f) * q[j] + (b.qs[j] >> 4) * q[j + 16];
  return s;
}
inline int32_t block_isum(const BlockQ4_0& b, const int8_t* q) {
  int32_t s = 0;
  for (int j = 0; j < 16; ++j) s += (b.qs[j] & 0x0f) * q[j] + (b.qs[j] >> 4) * q[j + 16];
  return s;
}
inline int32_t block_isum(const BlockQ8_0& b, const int8_t* q) {
  int32_t s = 0;
  for (int j = 0; j < 32; ++j) s += b.qs[j] * q[j];
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
        acc += dw * xr[b].d * static_cast<float>(block_isum(wr[b], xr[b].qs));
        if (with_offsets) acc += WeightFormat<B>::offset(wr[b], dw) * xr[b].s;
      }
      out[i * ldo + j] = acc;
    }
  }
}

// ---- AVX2 (+ AVX-512 VNNI) ----

#define VRUN_AVX2 __attribute__((target("avx2,fma,f16c")))
#define VRUN_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

// The weight quants as 32 unsigned bytes in element order, and whether the activation's signs
// must absorb the weight's (q8_0: |w| * sign(x, w)).
template <typename B>
struct Unpack;
template <>
struct Unpack<BlockQ4_1> {
  static constexpr bool kSigned = false;
  VRUN_AVX2 static inline __m256i load(const BlockQ4_1& b) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
  }
};
template <>
struct Unpack<BlockQ4_0> {
  static constexpr bool kSigned = false;
  VRUN_AVX2 static inline __m256i load(const BlockQ4_0& b) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
  }
};
template <>
struct Unpack<BlockQ8_0> {
  static constexpr bool kSigned = true;
  VRUN_AVX2 static inline __m256i load(const BlockQ8_0& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};

VRUN_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

VRUN_AVX2 inline float f16_scalar(uint16_t h) { return _cvtsh_ss(h); }

// Offset terms sum(c_b * sx_b) per (i, j); cheap (one multiply-add per block pair) so kept out
// of the vector loop, whose registers all hold accumulators.
template <typename B>
VRUN_AVX2 void add_offsets(const void* w, int64_t ws, int nw, const BlockQ8Act* x, int64_t xs, int nx, int64_t nb,
                           float* out, int64_t ldo) {
  if constexpr (!std::is_same_v<B, BlockQ8_0>) {
    for (int j = 0; j < nw; ++j) {
      const B* wr = wrow<B>(w, ws, j);
      for (int i = 0; i < nx; ++i) {
        const BlockQ8Act* xr = x + xs * i;
        float c = 0;
        for (int64_t b = 0; b < nb; ++b) {
          if constexpr (std::is_same_v<B, BlockQ4_1>)
            c += f16_scalar(wr[b].m) * xr[b].s;
          else
            c -= 8.f * f16_scalar(wr[b].d) * xr[b].s;
        }
        out[i * ldo + j] += c;
      }
    }
  }
}

// One NX x NW tile; kVnni selects vpdpbusd (no i16 saturation step) over maddubs + madd.
#define VRUN_TILE_BODY                                                                          \
  __m256 acc[NX][NW];                                                                           \
  for (int i = 0; i < NX; ++i)                                                                  \
    for (int j = 0; j < NW; ++j) acc[i][j] = _mm256_setzero_ps();                               \
  const B* wr[NW];                                                                              \
  for (int j = 0; j < NW; ++j) wr[j] = wrow<B>(w, ws, j);                                       \
  const __m256i ones = _mm256_set1_epi16(1);                                                    \
  (void)ones;                                                                                   \
  for (int64_t b = 0; b < nb; ++b) {                                                            \
    __m256i qw[NW];                                                                             \
    float dw[NW];                                                                               \
    for (int j = 0; j < NW; ++j) {                                                              \
      qw[j] = Unpack<B>::load(wr[j][b]);                                                        \
      dw[j] = f16_scalar(wr[j][b].d);                                                           \
    }                                                                                           \
    for (int i = 0; i < NX; ++i) {                                                              \
      const BlockQ8Act& xb = x[xs * i + b];                                                     \
      const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb.qs));           \
      for (int j = 0; j < NW; ++j) {                                                            \
        __m256i u = qw[j], s = qx;                                                              \
        if constexpr (Unpack<B>::kSigned) {                                                     \
          u = _mm256_sign_epi8(qw[j], qw[j]);                                                   \
          s = _mm256_sign_epi8(qx, qw[j]);                                                      \
        }                                                                                       \
        const __m256 f = _mm256_cvtepi32_ps(DOT(u, s));                                         \
        acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(dw[j] * xb.d), f, acc[i][j]);                \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  for (int i = 0; i < NX; ++i)                                                                  \
    for (int j = 0; j < NW; ++j) out[i * ldo + j] = hsum(acc[i][j]);                            \
  if (with_offsets) add_offsets<B>(w, ws, NW, x, xs, NX, nb, out, ldo);

template <typename B, int NX, int NW>
VRUN_AVX2 void tile_avx2(const void* w, int64_t ws, const BlockQ8Act* x, int64_t xs, int64_t nb, float* out,
                         int64_t ldo, bool with_offsets) {
#define DOT(u, s) _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones)
  VRUN_TILE_BODY
#undef DOT
}

template <typename B, int NX, int NW>
VRUN_VNNI void tile_vnni(const void* w, int64_t ws, const BlockQ8Act* x, int64_t xs, int64_t nb, float* out,
                         int64_t ldo, bool with_offsets) {
#define DOT(u, s) _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
  VRUN_TILE_BODY
#undef DOT
}

using TileFn = void (*)(const void*, int64_t, const BlockQ8Act*, int64_t, int64_t, float*, int64_t, bool);

// Tables of [NX - 1][NW - 1] instantiations.
template <typename B, bool kVnni, int NX, int... NWs>
constexpr std::array<TileFn, 4> row_of(std::integer_sequence<int, NWs...>) {
  if constexpr (kVnni)
    return {&tile_vnni<B, NX, NWs + 1>...};
  else
    return {&tile_avx2<B, NX, NWs + 1>...};
}
template <typename B, bool kVnni, int... NXs>
constexpr std::array<std::array<TileFn, 4>, 4> table_of(std::integer_sequence<int, NXs...>) {
  return {row_of<B, kVnni, NXs + 1>(std::make_integer_sequence<int, 4>{})...};
}

enum class Isa { kScalar, kAvx2, kVnni };

Isa detect_isa() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");  // every AVX2 CPU has F16C (clang cannot test it)
  if (!avx2) return Isa::kScalar;
  if (__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    return Isa::kVnni;
  return Isa::kAvx2;
}

const Isa kIsa = detect_isa();
std::atomic<bool> g_force_scalar{false};

template <typename B>
void tile_dispatch(const void* w, int64_t ws, int nw, const BlockQ8Act* x, int64_t xs, int nx, int64_t nb, float* out,
                   int64_t ldo, bool with_offsets) {
  const Isa isa = g_force_scalar.load(std::memory_order_relaxed) ? Isa::kScalar : kIsa;
  if (isa == Isa::kScalar) {
    tile_scalar<B>(w, ws, nw, x, xs, nx, nb, out, ldo, with_offsets);
    return;
  }
  static const auto avx2 = table_of<B, false>(std::make_integer_sequence<int, 4>{});
  static const auto vnni = table_of<B, true>(std::make_integer_sequence<int, 4>{});
  const auto& tab = isa == Isa::kVnni ? vnni : avx2;
  // AVX2 has 16 vector registers: 4 x 2 tiles keep the accumulators in them; AVX-512VL's 32
  // registers take 4 x 4.
  const int max_w = isa == Isa::kVnni ? 4 : 2;
  for (int j0 = 0; j0 < nw; j0 += max_w) {
    const int tw = std::min(max_w, nw - j0);
    for (int i0 = 0; i0 < nx; i0 += 4) {
      const int tx = std::min(4, nx - i0);
      tab[tx - 1][tw - 1](static_cast<const uint8_t*>(w) + ws * j0, ws, x + xs * i0, xs, nb, out + i0 * ldo + j0, ldo,
                               with_offsets);
    }
  }
}

}  // namespace

void quantize_act_row(const float* x, BlockQ8Act* dst, int64_t k) {
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* v = x + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(v[j]));
    const float d = amax / 127.f;
    const float id = d != 0 ? 127.f / amax : 0.f;
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::nearbyint(v[j] * id));
      dst[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    dst[b].d = d;
    dst[b].s = d * static_cast<float>(sum);
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

namespace {

template <typename B>
VRUN_AVX2 void offsets_f16c(const B* b, int64_t nblocks, float* c) {
  for (int64_t i = 0; i < nblocks; ++i) {
    if constexpr (std::is_same_v<B, BlockQ4_1>)
      c[i] = _cvtsh_ss(b[i].m);
    else
      c[i] = -8.f * _cvtsh_ss(b[i].d);
  }
}

}  // namespace

bool quant_weight_offsets(DType wt, const void* wrow, int64_t nblocks, float* c) {
  if (wt != DType::q4_1 && wt != DType::q4_0) return false;
  if (kIsa != Isa::kScalar) {
    if (wt == DType::q4_1)
      offsets_f16c(static_cast<const BlockQ4_1*>(wrow), nblocks, c);
    else
      offsets_f16c(static_cast<const BlockQ4_0*>(wrow), nblocks, c);
    return true;
  }
  if (wt == DType::q4_1) {
    const auto* b = static_cast<const BlockQ4_1*>(wrow);
    for (int64_t i = 0; i < nblocks; ++i) c[i] = f16_to_f32(b[i].m);
    return true;
  }
  if (wt == DType::q4_0) {
    const auto* b = static_cast<const BlockQ4_0*>(wrow);
    for (int64_t i = 0; i < nblocks; ++i) c[i] = -8.f * f16_to_f32(b[i].d);
    return true;
  }
  return false;
}

const char* quant_dot_isa() {
  if (g_force_scalar.load()) return "scalar";
  return kIsa == Isa::kVnni ? "avx512vnni" : kIsa == Isa::kAvx2 ? "avx2" : "scalar";
}

void quant_dot_force_scalar(bool on) { g_force_scalar.store(on); }

}  // namespace vrun
