// Device memory: a sub-allocator over large VkDeviceMemory blocks, each with one VkBuffer
// spanning it, so a tensor is (block buffer, byte offset) and binding it needs no new Vulkan
// object. Two pools: device-local memory for tensors, host-visible memory for staging.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::vulkan {

class Context;
class Allocator;

// kUpload: small host-written data of a call (token ids, positions, frame indices). Device-local
// memory the host can map (resizable BAR) where the device has it, else the host-visible staging
// memory. Where it is device-local, kernels read a call's small inputs from it in place: on an
// H100 even a copy of a few bytes costs a decode step about 16 us of GPU time.
enum class MemoryKind { kDevice, kHost, kUpload };
// What counts as small for MemoryKind::kUpload: a call's inputs up to this size live there (where
// it is device-local), and uploads up to it are staged there.
constexpr uint64_t kSmallUploadBytes = 64u << 10;

// A non-owning reference to a range of device memory: what device views and descriptors carry.
struct BufferRef {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t offset = 0;  // bytes from the start of `buffer`
  uint64_t size = 0;
  void* mapped = nullptr;  // host address of byte `offset` when the memory is host-visible
  bool present() const { return buffer != VK_NULL_HANDLE; }
};

// An owned sub-allocation; returned to its block on destruction.
class Buffer {
 public:
  Buffer() = default;
  ~Buffer() { release(); }
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  bool valid() const { return allocator_ != nullptr; }
  uint64_t size() const { return size_; }
  BufferRef ref() const;
  // Host address when the memory is host-visible (always for kHost; on unified-memory devices also
  // for kDevice), else nullptr.
  void* mapped() const;

 private:
  friend class Allocator;
  void release();
  Allocator* allocator_ = nullptr;
  int block_ = -1;
  uint64_t offset_ = 0;
  uint64_t size_ = 0;
};

struct MemoryStats {
  uint64_t heap_size = 0;    // device-local heap
  uint64_t heap_budget = 0;  // what the driver says this process may use (VK_EXT_memory_budget), else heap size
  uint64_t heap_usage = 0;   // what the process uses now (driver's view when the budget extension exists)
  uint64_t reserved = 0;     // VkDeviceMemory this allocator holds
  uint64_t allocated = 0;    // bytes handed out in Buffers
};

class Allocator {
 public:
  explicit Allocator(Context& ctx) : ctx_(ctx) {}
  ~Allocator();
  Status init();

  // bytes > 0; the offset is aligned for any storage-buffer binding. Out of memory is a kOutOfMemory
  // error naming the size asked, `what`, and the free memory.
  Result<Buffer> allocate(uint64_t bytes, MemoryKind kind = MemoryKind::kDevice, const std::string& what = "tensor");
  MemoryStats stats() const;
  // Makes sure min(bytes, a block) can be allocated later without asking the driver for memory:
  // creates a block where no block of `kind` has that much free in one range.
  Status reserve(uint64_t bytes, MemoryKind kind, const std::string& what);
  // Whether MemoryKind::kUpload is device-local (kernels may read it in place).
  bool upload_is_device_local() const { return upload_device_local_; }
  // The size of the blocks tensors of `kind` are sub-allocated from (larger ones get their own).
  uint64_t block_size(MemoryKind kind) const { return block_size_[static_cast<int>(kind)]; }
  // Binding alignment every Buffer offset honours.
  uint64_t alignment() const { return alignment_; }
  // Tests: every new block is refused as if the driver were out of memory.
  void refuse_new_blocks_for_testing(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    refuse_new_blocks_ = on;
  }

 private:
  friend class Buffer;
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkBuffer buffer = VK_NULL_HANDLE;
    uint64_t size = 0;
    MemoryKind kind = MemoryKind::kDevice;
    uint8_t* mapped = nullptr;
    std::map<uint64_t, uint64_t> free;  // offset -> size, coalesced
    bool dedicated = false;
  };
  Result<int> new_block(uint64_t size, MemoryKind kind, bool dedicated, const std::string& what, uint64_t asked);
  void free_range(int block, uint64_t offset, uint64_t size);
  // The caller holds mu_ (new_block's failures are reported from inside allocate()).
  Status out_of_memory(uint64_t asked, const std::string& what, MemoryKind kind) const;
  MemoryStats stats_locked() const;

  Context& ctx_;
  mutable std::mutex mu_;
  // VRUN_VK_STATS: sub-allocations and blocks asked of the driver, and the host time they took,
  // printed when the allocator goes.
  bool stats_on_ = false;
  bool stats_verbose_ = false;  // VRUN_VK_STATS=2: a line per new block
  bool refuse_new_blocks_ = false;
  uint64_t device_limit_ = 0;  // VRUN_VK_MEMORY_LIMIT (0: none)
  uint64_t n_allocs_ = 0, n_blocks_ = 0;
  double alloc_s_ = 0, block_s_ = 0;
  std::vector<Block> blocks_;
  uint32_t type_index_[3] = {0, 0, 0};
  uint32_t heap_index_[3] = {0, 0, 0};
  uint64_t block_size_[3] = {256ull << 20, 64ull << 20, 4ull << 20};
  uint64_t alignment_ = 256;
  bool upload_device_local_ = false;
  uint64_t allocated_ = 0;
};

}  // namespace vrun::vulkan
