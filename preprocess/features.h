// A feature matrix as the encoders consume it ([n_mels, frames], row-major float32) and the NumPy
// .npy reader/writer that lets anyone compare it with other tools.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::preprocess {

struct Features {
  int64_t n_mels = 0;
  int64_t frames = 0;
  std::vector<float> data;  // data[m * frames + t]

  Features() = default;
  Features(int64_t mels, int64_t n_frames, float fill = 0.0f)
      : n_mels(mels), frames(n_frames), data(static_cast<size_t>(mels * n_frames), fill) {}
  float& at(int64_t m, int64_t t) { return data[static_cast<size_t>(m * frames + t)]; }
  float at(int64_t m, int64_t t) const { return data[static_cast<size_t>(m * frames + t)]; }
  // Columns [begin, begin + count); columns past the end are filled with `fill`.
  Features slice_frames(int64_t begin, int64_t count, float fill = 0.0f) const;
};

// Writes a C-order float32 .npy with the given shape (1-D or 2-D).
Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data);
inline Status write_npy(const std::string& path, const Features& f) {
  return write_npy(path, {f.n_mels, f.frames}, f.data.data());
}

// A float32 array read from .npy (little-endian '<f4', C order).
struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
Result<NpyArray> read_npy(const std::string& path);

}  // namespace vrun::preprocess
