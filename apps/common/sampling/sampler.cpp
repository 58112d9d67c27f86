#include "apps/common/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace vrun {

int32_t argmax(std::span<const float> v) {
  // The first index of the largest value, NaN never taken (as `if (v[i] > best)` over i would
  // have it, a NaN first element kept): the largest value in eight independent lanes first (the
  // one-lane loop waits on each comparison: 80 us a 49,152-token row on a server core), then the
  // first index holding it.
  const size_t n = v.size();
  if (n == 0 || std::isnan(v[0])) return 0;
  float lane[8];
  for (float& l : lane) l = v[0];
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (size_t j = 0; j < 8; ++j) lane[j] = v[i + j] > lane[j] ? v[i + j] : lane[j];
  float m = lane[0];
  for (size_t j = 1; j < 8; ++j) m = lane[j] > m ? lane[j] : m;
  for (; i < n; ++i) m = v[i] > m ? v[i] : m;
  for (i = 0; i < n; ++i)
    if (v[i] == m) break;
  return static_cast<int32_t>(i);
}

Sampler::Sampler(const SamplingOptions& options) : o_(options) {
  seed_ = options.seed ? options.seed : std::random_device{}();
  rng_.seed(seed_);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent) {
  const bool penalty = this->penalty();
  // Greedy: the first of the largest logits (after the penalty), without the candidate list (a
  // batched step samples every row of a 49,152-token vocabulary on one thread).
  if (greedy()) return argmax(logits);
  cand_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand_[i] = {logits[i], static_cast<int32_t>(i)};
  if (penalty) {
    const size_t n = o_.repeat_last_n < 0 ? recent.size() : std::min<size_t>(recent.size(), o_.repeat_last_n);
    std::unordered_set<int32_t> seen(recent.end() - static_cast<std::ptrdiff_t>(n), recent.end());
    for (int32_t t : seen) {
      if (t < 0 || static_cast<size_t>(t) >= cand_.size()) continue;
      float& l = cand_[t].first;
      l = l > 0 ? l / o_.repeat_penalty : l * o_.repeat_penalty;
    }
  }
  if (o_.temperature <= 0.f) {
    size_t best = 0;
    for (size_t i = 1; i < cand_.size(); ++i)
      if (cand_[i].first > cand_[best].first) best = i;
    return cand_[best].second;
  }
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = cand_.size();
  if (o_.top_k > 0 && static_cast<size_t>(o_.top_k) < keep) {
    keep = static_cast<size_t>(o_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(keep), cand_.end(), by_logit);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  cand_.resize(keep);
  // Softmax at the temperature.
  const float mx = cand_[0].first;
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((cand_[i].first - mx) / o_.temperature);
  for (auto& x : p) x /= sum;
  if (o_.top_p < 1.f) {
    double acc = 0;
    size_t n = 0;
    while (n < keep) {
      acc += p[n++];
      if (acc >= o_.top_p) break;
    }
    keep = std::max<size_t>(n, 1);
  }
  if (o_.min_p > 0.f) {
    size_t n = 1;
    while (n < keep && p[n] >= o_.min_p * p[0]) ++n;
    keep = n;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  std::uniform_real_distribution<double> u(0.0, total);
  double r = u(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= p[i];
    if (r <= 0) return cand_[i].second;
  }
  return cand_[keep - 1].second;
}

}  // namespace vrun
