// N-d .npy arrays for `vrun run`: little-endian float32/float64/int32/int64/bool, C order.
// float64 is read as float32. Headers and sizes are checked against the file before any read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/dtype.h"
#include "runtime/base/status.h"
#include "runtime/base/tensor.h"

namespace vrun::onnx {

struct NpyTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // dense, C order
  TensorView view();
};

Result<NpyTensor> read_npy_tensor(const std::string& path);
// Writes a dense copy of v (f32, i64, i32 or bool; a strided float view is gathered).
Status write_npy_tensor(const std::string& path, const TensorView& v);

}  // namespace vrun::onnx
