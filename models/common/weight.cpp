#include "models/common/weight.h"

#include <cstring>

#include "runtime/base/mapped_file.h"

namespace vrun::models {

std::vector<float> weight_to_f32(const Weight& w) {
  int64_t n = 1;
  for (int64_t d : w.shape) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  const auto* p = static_cast<const uint8_t*>(w.data);
  for (int64_t i = 0; i < n; ++i) {
    if (w.dtype == DType::f32) {
      std::memcpy(&out[static_cast<size_t>(i)], p + 4 * i, 4);
    } else if (w.dtype == DType::f64) {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      out[static_cast<size_t>(i)] = static_cast<float>(v);
    } else {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[static_cast<size_t>(i)] = w.dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  // The copy is what the program keeps: a mapped checkpoint's pages of the source need not stay
  // resident (touched again, they read back from the file).
  MappedFile::release_pages(w.data, static_cast<size_t>(dtype_bytes(w.dtype, n)));
  return out;
}

}  // namespace vrun::models
