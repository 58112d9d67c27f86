// Row counts of a family's batched step methods for S sequences (slots, streams): the powers of
// two below S, and S. A step of r live rows runs the smallest method that holds them.
#pragma once

#include <cstdint>
#include <vector>

namespace vrun::models {

inline std::vector<int64_t> batch_rows_for(int64_t sequences) {
  std::vector<int64_t> rows;
  for (int64_t b = 1; b < sequences; b *= 2) rows.push_back(b);
  if (sequences > 0) rows.push_back(sequences);
  return rows;
}

}  // namespace vrun::models
