#include "apps/whisper/logit_scan.h"

#include <immintrin.h>

#include <cmath>
#include <limits>

#include "runtime/base/cpu_features.h"
#include "runtime/base/vec_math.h"

namespace vrun::whisper {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Exponentials are taken a block at a time into a stack buffer (a loop the compiler vectorises),
// then summed in double.
constexpr size_t kBlock = 256;

// exp(x) for x <= 0 (logits less their maximum): Cody-Waite reduction x = n ln2 + r and the
// Cephes minimax polynomial on r (cpu::exp_reduced), without exp_fast's overflow and subnormal handling
// (below -87.3 it returns 2^-126 times the polynomial or less: nothing beside the max's 1).
VRUN_ALWAYS_INLINE float exp_nonpositive(float x) {
  x = cpu::select(x < -87.3f, -87.3f, x);  // also maps -inf (suppressed tokens) into range; NaN stays
  int32_t n;
  const float p = cpu::exp_reduced(x, &n);
  return p * cpu::bits_to_float(static_cast<uint32_t>(n + 127) << 23);
}

float max_generic(const float* x, size_t n) {
  // Four independent maxima: ILP without vectors. (v > m) is false for a NaN v, so NaNs are skipped.
  float m[4] = {kNegInf, kNegInf, kNegInf, kNegInf};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (size_t j = 0; j < 4; ++j) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float r = m[0];
  for (size_t j = 1; j < 4; ++j) r = m[j] > r ? m[j] : r;
  return r;
}

VRUN_AVX2 float max_avx2(const float* x, size_t n) {
  // max_ps returns its second operand when either is NaN: a NaN element keeps the running max.
  __m256 m0 = _mm256_set1_ps(kNegInf), m1 = m0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
  float r = max_generic(lanes, 8);
  for (; i < n; ++i) r = x[i] > r ? x[i] : r;
  return r;
}

size_t find_generic(const float* x, size_t n, float v) {
  for (size_t i = 0; i < n; ++i)
    if (x[i] == v) return i;
  return n;
}

VRUN_AVX2 size_t find_avx2(const float* x, size_t n, float v) {
  const __m256 t = _mm256_set1_ps(v);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_EQ_OQ));
    if (mask) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
  const size_t j = find_generic(x + i, n - i, v);
  return i + j;
}

double sum_exp_generic(const float* x, size_t n, float m) {
  float e[kBlock];
  double s[4] = {0, 0, 0, 0};
  for (size_t i0 = 0; i0 < n; i0 += kBlock) {
    const size_t len = n - i0 < kBlock ? n - i0 : kBlock;
    for (size_t j = 0; j < len; ++j) e[j] = exp_nonpositive(x[i0 + j] - m);
    size_t j = 0;
    for (; j + 4 <= len; j += 4)
      for (size_t k = 0; k < 4; ++k) s[k] += static_cast<double>(e[j + k]);
    for (; j < len; ++j) s[0] += static_cast<double>(e[j]);
  }
  return (s[0] + s[1]) + (s[2] + s[3]);
}

VRUN_AVX2 double sum_exp_avx2(const float* x, size_t n, float m) {
  alignas(32) float e[kBlock];
  __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
  double tail = 0;
  for (size_t i0 = 0; i0 < n; i0 += kBlock) {
    const size_t len = n - i0 < kBlock ? n - i0 : kBlock;
    for (size_t j = 0; j < len; ++j) e[j] = exp_nonpositive(x[i0 + j] - m);
    size_t j = 0;
    for (; j + 16 <= len; j += 16) {
      s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm_load_ps(e + j)));
      s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm_load_ps(e + j + 4)));
      s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm_load_ps(e + j + 8)));
      s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm_load_ps(e + j + 12)));
    }
    for (; j < len; ++j) tail += static_cast<double>(e[j]);
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + tail;
}

// exp_nonpositive on 16 lanes, the same operations in the same order (so the same values).
// GCC 12's AVX-512 headers fill their "undefined" operands from themselves, which -Wuninitialized
// reports once inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) double sum_exp_avx512(const float* x, size_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m), lo = _mm512_set1_ps(-87.3f), round = _mm512_set1_ps(12582912.f);
  const __m512i bias = _mm512_set1_epi32(127);
  __m512d s0 = _mm512_setzero_pd(), s1 = s0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
    v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
    const __m512 t = _mm512_add_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)), round);
    const __m512 fn = _mm512_sub_ps(t, round);
    const __m512i e = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_castps_si512(round));
    __m512 r = _mm512_sub_ps(v, _mm512_mul_ps(fn, _mm512_set1_ps(0.693359375f)));
    r = _mm512_add_ps(r, _mm512_mul_ps(fn, _mm512_set1_ps(2.12194440e-4f)));
    const __m512 r2 = _mm512_mul_ps(r, r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_add_ps(_mm512_mul_ps(p, r), _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(p, r2), r), _mm512_set1_ps(1.f));
    p = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, bias), 23)));
    s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
    s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1))));
  }
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(exp_nonpositive(x[i] - m));
  return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) + tail;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

bool cpu_has_avx512() {
  static const bool v = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
  }();
  return v;
}

}  // namespace

float max_logit(const float* x, size_t n) { return cpu_has_avx2() ? max_avx2(x, n) : max_generic(x, n); }

size_t argmax_logit(const float* x, size_t n) {
  if (n == 0) return 0;
  const float m = max_logit(x, n);
  const size_t i = cpu_has_avx2() ? find_avx2(x, n, m) : find_generic(x, n, m);
  return i < n ? i : 0;  // every value NaN: std::max_element's answer
}

double log_sum_exp_logits(const float* x, size_t n, float m) {
  if (!std::isfinite(m)) return m;
  const double s = cpu_has_avx512() ? sum_exp_avx512(x, n, m)
                   : cpu_has_avx2()   ? sum_exp_avx2(x, n, m)
                                      : sum_exp_generic(x, n, m);
  return static_cast<double>(m) + std::log(s);
}

}  // namespace vrun::whisper
