#include "runtime/base/npy_file.h"

#include <fstream>
#include <sstream>

namespace vrun {

Status write_npy_file(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape, const void* data,
                      size_t bytes) {
  std::ostringstream dict;
  dict << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  const size_t r = shape.size();
  for (size_t d = 0; d < r; ++d) dict << shape[d] << (r == 1 || d + 1 < r ? "," : "") << (d + 1 < r ? " " : "");
  dict << "), }";
  std::string header = dict.str();
  // The magic, version, length field and header together are a multiple of 64 bytes, ending in '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) return err(ErrorCode::kIo, path, ": cannot open for writing");
  const uint16_t len = static_cast<uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) return err(ErrorCode::kIo, path, ": write failed");
  return Status::ok();
}

}  // namespace vrun
