// Passes over one row of vocabulary logits that the decoder makes for every token (max, argmax,
// log-sum-exp): vectorised, since a scalar loop over 51k+ logits with a double exp per element
// cost more host time per token than a whole decoder step takes on a GPU.
#pragma once

#include <cstddef>

namespace vrun::whisper {

// The largest value of x[0, n), NaNs skipped (-inf when n == 0 or nothing else is there).
float max_logit(const float* x, size_t n);

// The index std::max_element gives on NaN-free input: the first holding the largest value.
size_t argmax_logit(const float* x, size_t n);

// log(sum(exp(x))) given m = max_logit(x, n): float exponentials (1-2 ulp) summed in double, so
// the result is within about 1e-7 of the all-double value. -inf when m is.
double log_sum_exp_logits(const float* x, size_t n, float m);

}  // namespace vrun::whisper
