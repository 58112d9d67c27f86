// What the memory-mapped checkpoint readers (safetensors, CTranslate2, GGUF, PyTorch zip) share.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "runtime/base/status.h"

namespace vrun::models {

// Elements of a tensor with these dimensions (1 for a scalar).
inline int64_t shape_numel(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// The part of a checkpoint file class that does not depend on its format: where it came from,
// what keeps its bytes alive, and parsing bytes held in memory. `File` derives from
// CheckpointFile<File>, befriends it and defines
//   static Result<std::shared_ptr<File>> parse(std::shared_ptr<const void> storage, const uint8_t* d, size_t size,
//                                              const std::string& path);
template <class File>
class CheckpointFile {
 public:
  // The same checks as File::open on bytes in memory (copied); `name` is used in messages.
  static Result<std::shared_ptr<File>> from_bytes(const std::string& bytes, const std::string& name) {
    auto copy = std::make_shared<std::string>(bytes);
    const auto* d = reinterpret_cast<const uint8_t*>(copy->data());
    return File::parse(std::move(copy), d, bytes.size(), name);
  }

  const std::string& path() const { return path_; }
  // Keeps the mapping (or the copy) alive for borrowed bytes.
  std::shared_ptr<const void> keep_alive() const { return storage_; }

 protected:
  std::string path_;
  std::shared_ptr<const void> storage_;
};

}  // namespace vrun::models
