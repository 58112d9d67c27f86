// Branch-free float math for hot elementwise loops (softmax, sigmoid, silu, gelu). std::exp and
// friends do not vectorise without -ffast-math; these do, at about 1-2 ulp.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "runtime/base/convert.h"

namespace vrun::cpu {

// c ? a : b as a bit blend. A plain ?: whose arm holds float arithmetic is kept as a branch
// under -ftrapping-math (the default), which stops the loop from vectorising.
VRUN_ALWAYS_INLINE float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return bits_to_float((float_to_bits(a) & m) | (float_to_bits(b) & ~m));
}

// exp(x) by Cody-Waite reduction x = n ln2 + r and the Cephes minimax polynomial on r; the

// exp(x) = p * 2^n for x in exp_fast's clamped range: Cody-Waite reduction x = n ln2 + r and the
// Cephes minimax polynomial p on r; callers apply 2^n as their range needs.
VRUN_ALWAYS_INLINE float exp_reduced(float x, int32_t* n) {
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = x * 1.44269504088896341f + kRound;
  const float fn = t - kRound;
  *n = static_cast<int32_t>(float_to_bits(t) - float_to_bits(kRound));
  float r = x - fn * 0.693359375f;
  r = r + fn * 2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r2 + r + 1.f;
}

// scale 2^n is applied in two halves so results down to the subnormal range stay exact.
VRUN_ALWAYS_INLINE float exp_fast(float x) {
  constexpr float kHi = 88.72283935546875f;  // ln(FLT_MAX)
  constexpr float kLo = -103.972076416015625f;  // below this exp rounds to 0
  const float xc = select(x < kLo, kLo, select(x > kHi, kHi, x));
  int32_t n;
  const float p = exp_reduced(xc, &n);
  const int32_t n1 = n / 2, n2 = n - n1;
  const float s1 = bits_to_float(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = bits_to_float(static_cast<uint32_t>(n2 + 127) << 23);
  float res = (p * s1) * s2;
  res = select(x > kHi, std::numeric_limits<float>::infinity(), res);
  res = select(x < kLo, 0.f, res);
  return select(x != x, x, res);
}

VRUN_ALWAYS_INLINE float sigmoid_fast(float x) { return 1.f / (1.f + exp_fast(-x)); }

// tanh through exp; absolute error ~1e-7 (relative error grows near 0, so the tanh op itself
// uses std::tanh; gelu only needs the absolute accuracy).
VRUN_ALWAYS_INLINE float tanh_fast(float x) {
  const uint32_t sign = float_to_bits(x) & 0x80000000u;
  const float e = exp_fast(-2.f * bits_to_float(float_to_bits(x) & 0x7fffffffu));
  const float t = (1.f - e) / (1.f + e);
  return bits_to_float(float_to_bits(t) | sign);
}

// gelu, exact form (torch's approximate = none): the gelu op and linear's act = gelu.
// erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7, the form the Vulkan kernels
// use), branch-free so that loops over it vectorise (std::erf does not): gelu only needs the
// absolute accuracy, since 1 + erf is what it multiplies by. The erf op itself uses std::erf.
VRUN_ALWAYS_INLINE float erf_fast(float x) {
  const uint32_t sign = float_to_bits(x) & 0x80000000u;
  const float a = bits_to_float(float_to_bits(x) & 0x7fffffffu);
  const float t = 1.f / (1.f + 0.3275911f * a);
  const float p = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
  const float y = 1.f - p * exp_fast(-a * a);
  // |y| with x's sign (y can round to a hair below 0 at x = 0); nan stays nan.
  return bits_to_float((float_to_bits(y) & 0x7fffffffu) | sign);
}

VRUN_ALWAYS_INLINE float gelu_erf(float v) { return 0.5f * v * (1.f + erf_fast(v * 0.70710678118654752f)); }

}  // namespace vrun::cpu
