// Parakeet results against NeMo's goldens: an encoder output (a goldens file's encoder_output,
// [frame][channel]) and a TDT decoding (token ids, their frames, their durations).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/parakeet/parakeet_runner.h"

namespace vrun::parakeet {

// enc: [frames, d] row-major. Within 1e-4 of the golden, relative to its largest |value| (at least 1).
inline void expect_encoder_output(const std::vector<float>& enc, const nlohmann::json& ref, int64_t d, const std::string& what) {
  ASSERT_EQ(static_cast<int64_t>(enc.size()), static_cast<int64_t>(ref.size()) * d) << what;
  double worst = 0, scale = 0;
  for (size_t t = 0; t < ref.size(); ++t)
    for (int64_t c = 0; c < d; ++c) {
      const double want = ref[t][c].get<double>();
      worst = std::max(worst, std::abs(enc[t * static_cast<size_t>(d) + static_cast<size_t>(c)] - want));
      scale = std::max(scale, std::abs(want));
    }
  EXPECT_LT(worst, 1e-4 * std::max(1.0, scale)) << what << ": largest |value| " << scale;
}

// A decoding's token ids against a clip's goldens (token_ids); for a TDT head (`tdt`) also their
// start frames and durations (token_frames, durations).
inline void expect_tokens(const Decoded& d, const nlohmann::json& want, bool tdt = true) {
  std::vector<int64_t> ids, frames;
  for (const auto& t : d.tokens) {
    ids.push_back(t.id);
    frames.push_back(t.start);
  }
  EXPECT_EQ(ids, want["token_ids"].get<std::vector<int64_t>>());
  if (tdt) {
    EXPECT_EQ(frames, want["token_frames"].get<std::vector<int64_t>>());
    EXPECT_EQ(d.durations, want["durations"].get<std::vector<int64_t>>());
  }
}

}  // namespace vrun::parakeet
