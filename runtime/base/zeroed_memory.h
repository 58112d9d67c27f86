// Host memory that starts zeroed without being touched, and can be zeroed again cheaply: the
// executor's state buffers (KV caches sized for the whole context, recurrent state). The pages
// come from the kernel on first touch, so a cache that a GPU run keeps on the device, or a CPU run
// that uses only its first rows, costs resident memory only for what is written; zero() hands the
// pages back instead of writing zeros over them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vrun {

class ZeroedMemory {
 public:
  ZeroedMemory() = default;
  // Null data() when the memory could not be had. accessible = false reserves the addresses
  // only: any read or write faults. For a host view whose bytes live only on a GPU, so that the
  // view has an address (views of it are offsets from it) and no host access goes unnoticed.
  explicit ZeroedMemory(size_t bytes, bool accessible = true);
  ~ZeroedMemory();
  ZeroedMemory(ZeroedMemory&& o) noexcept;
  ZeroedMemory& operator=(ZeroedMemory&& o) noexcept;
  ZeroedMemory(const ZeroedMemory&) = delete;
  ZeroedMemory& operator=(const ZeroedMemory&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Every byte reads zero again.
  void zero();

 private:
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;     // as asked
  size_t mapped_ = 0;   // whole pages
  bool accessible_ = true;
};

}  // namespace vrun
