// Greedy sampling's argmax (eight-lane maximum, then the first index holding it) against the
// one-comparison-at-a-time loop that defines it: ties to the first index, NaN never taken (a NaN
// first element kept), -0 and +0 equal; short rows, rows not a multiple of eight, a vocabulary's
// length; and Sampler at temperature 0 with and without the repetition penalty.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "apps/common/sampling/sampler.h"

namespace vrun {
namespace {

int32_t reference_argmax(const std::vector<float>& v) {
  int32_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

TEST(Sampler, ArgmaxIsTheFirstLargest) {
  std::mt19937 rng(5);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> pool = {-1.f, 0.f, -0.f, 2.f, 2.f, 3.f, -inf, inf, nan};
  for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{8}, size_t{9}, size_t{17}, size_t{64}, size_t{49152}}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> v(n);
      // Few distinct values (ties everywhere), some trials with NaN and infinities.
      const size_t kinds = trial % 3 == 0 ? pool.size() : 6;
      for (float& x : v) x = pool[rng() % kinds];
      if (trial % 5 == 1) v[0] = nan;
      if (trial % 7 == 2) v.back() = 5.f;
      EXPECT_EQ(argmax(v), reference_argmax(v)) << "n " << n << " trial " << trial;
    }
  }
  std::vector<float> wide(49152);
  std::normal_distribution<float> g;
  for (float& x : wide) x = g(rng);
  EXPECT_EQ(argmax(wide), reference_argmax(wide));
  EXPECT_EQ(argmax(std::vector<float>{}), 0);
}

TEST(Sampler, GreedyWithAndWithoutPenalty) {
  std::vector<float> logits = {0.5f, 3.f, 2.9f, -1.f, 3.f};
  SamplingOptions o;
  o.temperature = 0;
  Sampler plain(o);
  EXPECT_EQ(plain.sample(logits, {}), 1);
  o.repeat_penalty = 1.1f;
  Sampler penalised(o);
  const std::vector<int32_t> recent = {1, 4};
  EXPECT_EQ(penalised.sample(logits, recent), 2);  // 3 / 1.1 < 2.9
}

}  // namespace
}  // namespace vrun
