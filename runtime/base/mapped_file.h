// A read-only memory mapping of a whole file, shared by every reader (programs, GGUF,
// safetensors, CTranslate2): tensors point into it and keep it alive through shared_ptr.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/base/status.h"

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

  // Hands back the resident pages wholly inside [p, p + n) when that range lies in a live
  // mapping: they leave the process's resident memory (the page cache keeps them) and read the
  // same again if touched, faulted back in from the file. For weights whose only other copy now
  // lives elsewhere (uploaded to a GPU; copied into a stacked or aligned buffer). Anything else
  // (heap, a range not inside one mapping) is left alone. Returns the bytes handed back.
  static size_t release_pages(const void* p, size_t n);

 private:
  MappedFile() = default;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace vrun
