#include "preprocess/features.h"

#include "runtime/base/npy_file.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

namespace vrun::preprocess {

Features Features::slice_frames(int64_t begin, int64_t count, float fill) const {
  Features out(n_mels, count, fill);
  const int64_t lo = std::clamp<int64_t>(begin, 0, frames);
  const int64_t hi = std::clamp<int64_t>(begin + count, 0, frames);
  for (int64_t m = 0; m < n_mels; ++m)
    for (int64_t t = lo; t < hi; ++t) out.at(m, t - begin) = at(m, t);
  return out;
}

Status write_npy(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  if (shape.empty() || shape.size() > 2) return err(ErrorCode::kInvalidArgument, path, ": .npy writer takes 1-D or 2-D shapes");
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return write_npy_file(path, "<f4", shape, data, static_cast<size_t>(count) * sizeof(float));
}

Result<NpyArray> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return err(ErrorCode::kNotFound, path, ": cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    return err(ErrorCode::kInvalidArgument, path, ": not a .npy file (bad magic)");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint16_t l16 = 0;
    in.read(reinterpret_cast<char*>(&l16), 2);
    header_len = l16;
  } else {
    in.read(reinterpret_cast<char*>(&header_len), 4);
  }
  if (!in || header_len > (1u << 20)) return err(ErrorCode::kInvalidArgument, path, ": bad .npy header length");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) return err(ErrorCode::kInvalidArgument, path, ": truncated .npy header");
  if (header.find("'<f4'") == std::string::npos)
    return err(ErrorCode::kUnsupported, path, ": only little-endian float32 .npy is read, header is ", header);
  if (header.find("'fortran_order': True") != std::string::npos)
    return err(ErrorCode::kUnsupported, path, ": Fortran-order .npy is not read");
  const size_t open = header.find('(', header.find("'shape'"));
  const size_t close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) return err(ErrorCode::kInvalidArgument, path, ": .npy header has no shape");
  NpyArray arr;
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  std::string item;
  int64_t count = 1;
  while (std::getline(dims, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    arr.shape.push_back(std::stoll(item));
    count *= arr.shape.back();
  }
  arr.data.resize(static_cast<size_t>(count));
  if (!in.read(reinterpret_cast<char*>(arr.data.data()), static_cast<std::streamsize>(count * sizeof(float))))
    return err(ErrorCode::kInvalidArgument, path, ": .npy data shorter than its shape says");
  return arr;
}

}  // namespace vrun::preprocess
