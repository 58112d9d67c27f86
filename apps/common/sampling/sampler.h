// Token sampling from logits: repetition penalty, temperature, top-k, top-p, min-p, in
// llama.cpp's order; temperature 0 is greedy (argmax, first index on ties).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace vrun {

struct SamplingOptions {
  float temperature = 0.8f;
  int top_k = 40;            // 0: off
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off
  float repeat_penalty = 1.0f;  // 1: off
  int repeat_last_n = 64;    // how many recent tokens the penalty looks at
  uint64_t seed = 0;         // 0: a random seed
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  // Picks a token id from logits; `recent` are the tokens seen so far (for the penalty).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> recent);
  // Whether sample() is argmax(logits) alone (temperature 0, no repetition penalty): then the
  // model's own greedy token (an argmax on the device) is the sample, and the logits need not be
  // read back.
  bool greedy() const { return o_.temperature <= 0.f && !penalty(); }
  uint64_t seed() const { return seed_; }

 private:
  bool penalty() const { return o_.repeat_penalty != 1.0f && o_.repeat_last_n != 0; }
  SamplingOptions o_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

// Index of the largest value (first on ties).
int32_t argmax(std::span<const float> v);

}  // namespace vrun
