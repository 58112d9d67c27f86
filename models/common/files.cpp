#include "models/common/files.h"

#include <fstream>
#include <iterator>

namespace vrun::models {

Result<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return err(ErrorCode::kNotFound, path.string(), ": cannot open");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace vrun::models
