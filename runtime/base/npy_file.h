// The .npy container (NumPy format 1.0): one writer for every array vrun saves (log-mel features,
// `vrun run` outputs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun {

// Writes `bytes` bytes of C-order elements described by `descr` ('<f4', '<i8', '|b1', ...) with
// the given shape; the header is padded so that the data starts at a multiple of 64 bytes.
Status write_npy_file(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                      size_t bytes);

}  // namespace vrun
