// The decoder's vocabulary-row passes against plain float64 loops: rows of every length around
// the vector widths, with suppressed (-inf) entries, ties, and values far below the maximum.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "apps/whisper/logit_scan.h"

namespace vrun::whisper {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

double reference_lse(const std::vector<float>& x) {
  double m = kNegInf;
  for (float v : x) m = std::max<double>(m, v);
  if (!std::isfinite(m)) return m;
  double s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  return m + std::log(s);
}

TEST(LogitScan, MaxArgmaxAndLogSumExpMatchFloat64) {
  std::mt19937 rng(3);
  std::normal_distribution<float> logit(0.f, 6.f);
  for (size_t n : {1, 3, 7, 8, 15, 16, 17, 31, 255, 256, 257, 1000, 51864}) {
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE("n " + std::to_string(n) + " variant " + std::to_string(variant));
      std::vector<float> x(n);
      for (float& v : x) v = logit(rng);
      if (variant >= 1)  // suppressed tokens and a value far below the rest
        for (size_t i = 0; i < n; i += 3) x[i] = i % 2 ? kNegInf : -150.f;
      if (variant == 2 && n > 2) x[n - 1] = x[n / 2] = 40.f;  // a tie: the first index wins
      const auto want_at = static_cast<size_t>(std::max_element(x.begin(), x.end()) - x.begin());
      EXPECT_EQ(max_logit(x.data(), n), x[want_at]);
      EXPECT_EQ(argmax_logit(x.data(), n), want_at);
      const double want = reference_lse(x), got = log_sum_exp_logits(x.data(), n, x[want_at]);
      EXPECT_NEAR(got, want, 1e-6 * std::max(1.0, std::abs(want)));
    }
  }
}

TEST(LogitScan, EverythingSuppressed) {
  const std::vector<float> x(70, kNegInf);
  EXPECT_EQ(max_logit(x.data(), x.size()), kNegInf);
  EXPECT_EQ(argmax_logit(x.data(), x.size()), 0u);
  EXPECT_EQ(log_sum_exp_logits(x.data(), x.size(), kNegInf), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(max_logit(x.data(), 0), kNegInf);
}

}  // namespace
}  // namespace vrun::whisper
