// AVX2 pieces the CPU kernels share: eight elements of a float row as f32, and a horizontal sum.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "runtime/base/cpu_features.h"
#include "runtime/base/dtype.h"

namespace vrun::cpu {

// Elements i .. i + 7 of a row of T (f32, f16 or bf16) as f32.
template <DType T>
VRUN_AVX2 inline __m256 load8(const void* row, int64_t i) {
  if constexpr (T == DType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  } else if constexpr (T == DType::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i)));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

// The sum of the eight lanes.
VRUN_AVX2 inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace vrun::cpu
