#include "kernels/cpu/attention_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "kernels/cpu/avx2_util.h"
#include "runtime/base/cpu_features.h"
#include "runtime/base/vec_math.h"

namespace vrun {

namespace {

const bool kHaveAvx2 = cpu_has_avx2();

using cpu::hsum8;
using cpu::load8;

// scores[j] = scale * q . k_j. Eight keys at a time: eight independent FMA chains hide the FMA
// latency, and one transpose-add tree turns the eight accumulators into eight scores.
template <DType T>
VRUN_AVX2 void scores_of(const float* q, const void* k, int64_t ks, int64_t d, int64_t n, float scale, float* s) {
  const int64_t es = static_cast<int64_t>(dtype_elem_size(T));
  const auto* kb = static_cast<const uint8_t*>(k);
  const __m256 vs = _mm256_set1_ps(scale);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 a[8];
    for (int u = 0; u < 8; ++u) a[u] = _mm256_setzero_ps();
    for (int64_t p = 0; p < d; p += 8) {
      const __m256 qv = _mm256_loadu_ps(q + p);
      for (int u = 0; u < 8; ++u) a[u] = _mm256_fmadd_ps(qv, load8<T>(kb + (j + u) * ks * es, p), a[u]);
    }
    const __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    const __m256 r = _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20), _mm256_permute2f128_ps(t0, t1, 0x31));
    _mm256_storeu_ps(s + j, _mm256_mul_ps(r, vs));
  }
  for (; j < n; ++j) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t p = 0; p < d; p += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + p), load8<T>(kb + j * ks * es, p), a);
    s[j] = scale * hsum8(a);
  }
}

// p[j] = exp(s[j] - mx) in place; returns sum p.
VRUN_AVX2 float exp_and_sum(float* s, int64_t n, float mx) {
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    s[j] = cpu::exp_fast(s[j] - mx);
    sum += s[j];
  }
  return sum;
}

// out[c0, c0 + 8 NC) = sum_j p[j] v_j[c0, ...), the NC accumulators held in registers.
template <DType T, int NC>
VRUN_AVX2 void weighted_sum(const float* p, const void* v, int64_t vs, int64_t n, int64_t c0, float inv, float* out) {
  const int64_t es = static_cast<int64_t>(dtype_elem_size(T));
  const auto* vb = static_cast<const uint8_t*>(v);
  __m256 a[NC];
  for (int c = 0; c < NC; ++c) a[c] = _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const uint8_t* row = vb + j * vs * es;
    for (int c = 0; c < NC; ++c) a[c] = _mm256_fmadd_ps(pj, load8<T>(row, c0 + 8 * c), a[c]);
  }
  const __m256 vi = _mm256_set1_ps(inv);
  for (int c = 0; c < NC; ++c) _mm256_storeu_ps(out + c0 + 8 * c, _mm256_mul_ps(a[c], vi));
}

template <DType T>
VRUN_AVX2 void attend(const float* q, const void* k, int64_t ks, const void* v, int64_t vs, int64_t d, int64_t dv,
                      int64_t n, float scale, const float* mask, float* s, float* out) {
  scores_of<T>(q, k, ks, d, n, scale, s);
  if (mask)
    for (int64_t j = 0; j < n; ++j) s[j] += mask[j];
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, s[j]);
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(out, out + dv, 0.f);
    return;
  }
  const float inv = 1.f / exp_and_sum(s, n, mx);
  int64_t c0 = 0;
  for (; c0 + 64 <= dv; c0 += 64) weighted_sum<T, 8>(s, v, vs, n, c0, inv, out);
  for (; c0 < dv; c0 += 8) weighted_sum<T, 1>(s, v, vs, n, c0, inv, out);
}

}  // namespace

bool attend_row_supported(DType kv, int64_t d, int64_t dv) {
  return kHaveAvx2 && (kv == DType::f32 || kv == DType::f16 || kv == DType::bf16) && d > 0 && d % 8 == 0 && dv > 0 &&
         dv % 8 == 0;
}

void attend_row(DType kv, const float* q, const void* k, int64_t k_stride, const void* v, int64_t v_stride, int64_t d,
                int64_t dv, int64_t n_keys, float scale, const float* mask, float* scores, float* out) {
  switch (kv) {
    case DType::f16: attend<DType::f16>(q, k, k_stride, v, v_stride, d, dv, n_keys, scale, mask, scores, out); break;
    case DType::bf16: attend<DType::bf16>(q, k, k_stride, v, v_stride, d, dv, n_keys, scale, mask, scores, out); break;
    default: attend<DType::f32>(q, k, k_stride, v, v_stride, d, dv, n_keys, scale, mask, scores, out); break;
  }
}

}  // namespace vrun
