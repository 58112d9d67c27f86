// A read-only memory mapping of a whole file, shared by every reader (programs, GGUF,
// safetensors, CTranslate2): tensors point into it and keep it alive through shared_ptr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/status.h"

namespace vrun {

class MappedFile {
 public:
  // Errors: kNotFound (no such file), kIo (not a regular file, unreadable, mmap failed). An empty
  // file maps to size 0 and data nullptr; readers decide whether that is valid.
  static Result<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vrun
