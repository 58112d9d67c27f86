#include "kernels/vulkan/memory.h"

#include "runtime/base/knobs.h"

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cstdio>

#include "kernels/vulkan/context.h"

namespace vrun::vulkan {

namespace {

constexpr VkBufferUsageFlags kUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

// Adds the steady-clock seconds from its construction to its end to *sum (the stats' timings).
struct AddElapsed {
  double* sum;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~AddElapsed() { *sum += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

}  // namespace

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    allocator_ = o.allocator_;
    block_ = o.block_;
    offset_ = o.offset_;
    size_ = o.size_;
    o.allocator_ = nullptr;
  }
  return *this;
}

void Buffer::release() {
  if (allocator_) allocator_->free_range(block_, offset_, size_);
  allocator_ = nullptr;
}

BufferRef Buffer::ref() const {
  if (!allocator_) return {};
  std::lock_guard<std::mutex> lock(allocator_->mu_);
  const auto& b = allocator_->blocks_[block_];
  return {b.buffer, offset_, size_, b.mapped ? b.mapped + offset_ : nullptr};
}

void* Buffer::mapped() const { return ref().mapped; }

Allocator::~Allocator() {
  if (stats_on_ && n_allocs_)
    std::fprintf(stderr, "vulkan stats: %llu allocations in %.3f ms of host time; %llu new memory blocks in %.3f ms\n",
                 static_cast<unsigned long long>(n_allocs_), 1e3 * alloc_s_, static_cast<unsigned long long>(n_blocks_),
                 1e3 * block_s_);
  VkDevice dev = ctx_.device();
  for (auto& b : blocks_) {
    if (b.buffer) vkDestroyBuffer(dev, b.buffer, nullptr);
    if (b.memory) vkFreeMemory(dev, b.memory, nullptr);
  }
}

Status Allocator::init() {
  if (const char* lim = knob_value(Knob::VRUN_VK_MEMORY_LIMIT); lim && *lim) {
    char* end = nullptr;
    const double v = std::strtod(lim, &end);
    const std::string unit = end ? end : "";
    const double scale = unit.empty() ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1048576.0 : unit == "G" ? 1073741824.0 : -1;
    if (end == lim || !(v > 0) || scale < 0)
      return err(ErrorCode::kInvalidArgument, "VRUN_VK_MEMORY_LIMIT='", lim, "': expected bytes, optionally with K, M or G (e.g. 512M)");
    device_limit_ = static_cast<uint64_t>(v * scale);
  }
  stats_on_ = vk_stats_level() > 0;
  stats_verbose_ = vk_stats_level() == 2;
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(ctx_.physical_device(), &mem);
  auto pick = [&](VkMemoryPropertyFlags want, VkMemoryPropertyFlags prefer, uint32_t* out) {
    int best = -1;
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
      const auto f = mem.memoryTypes[i].propertyFlags;
      if ((f & want) != want) continue;
      if (best < 0 || ((f & prefer) == prefer && (mem.memoryTypes[best].propertyFlags & prefer) != prefer)) best = static_cast<int>(i);
    }
    if (best >= 0) *out = static_cast<uint32_t>(best);
    return best >= 0;
  };
  if (!pick(VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, &type_index_[0]) &&
      !pick(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, 0, &type_index_[0]))
    return err(ErrorCode::kUnsupported, "vulkan: device has no usable memory type");
  if (!pick(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
            &type_index_[1]))
    return err(ErrorCode::kUnsupported, "vulkan: device has no host-visible coherent memory for staging");
  const VkMemoryPropertyFlags bar =
      VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  upload_device_local_ = pick(bar, 0, &type_index_[2]);
  if (!upload_device_local_) type_index_[2] = type_index_[1];
  for (int k = 0; k < 3; ++k) {
    heap_index_[k] = mem.memoryTypes[type_index_[k]].heapIndex;
    // Small heaps (integrated GPUs, tests) get proportionally small blocks so one block never
    // takes a large share of them.
    block_size_[k] = std::min<uint64_t>(block_size_[k], std::max<uint64_t>(mem.memoryHeaps[heap_index_[k]].size / 16, 16ull << 20));
  }
  const auto& lim = ctx_.limits();
  alignment_ = std::max<uint64_t>({256, lim.minStorageBufferOffsetAlignment, lim.nonCoherentAtomSize});
  return Status::ok();
}

MemoryStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_locked();
}

MemoryStats Allocator::stats_locked() const {
  MemoryStats s;
  VkPhysicalDeviceMemoryBudgetPropertiesEXT budget{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 mem{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                        ctx_.info().memory_budget ? &budget : nullptr};
  vkGetPhysicalDeviceMemoryProperties2(ctx_.physical_device(), &mem);
  const uint32_t h = heap_index_[0];
  s.heap_size = mem.memoryProperties.memoryHeaps[h].size;
  for (const auto& b : blocks_)
    if (b.memory && b.kind == MemoryKind::kDevice) s.reserved += b.size;
  s.allocated = allocated_;
  if (ctx_.info().memory_budget) {
    s.heap_budget = budget.heapBudget[h];
    s.heap_usage = budget.heapUsage[h];
  } else {
    s.heap_budget = s.heap_size;
    s.heap_usage = s.reserved;
  }
  return s;
}

Status Allocator::out_of_memory(uint64_t asked, const std::string& what, MemoryKind kind) const {
  const MemoryStats s = stats_locked();
  const uint64_t free = s.heap_budget > s.heap_usage ? s.heap_budget - s.heap_usage : 0;
  return err(ErrorCode::kOutOfMemory, "vulkan: out of ", kind == MemoryKind::kDevice ? "device" : kind == MemoryKind::kUpload ? "upload" : "host-visible",
             " memory allocating ", asked, " bytes for ", what, " on ", ctx_.info().name, ": ", free, " bytes free of ",
             s.heap_budget, " (", mib(s.reserved), " reserved by vrun, ", mib(s.allocated), " in use)");
}

Result<int> Allocator::new_block(uint64_t size, MemoryKind kind, bool dedicated, const std::string& what, uint64_t asked) {
  const AddElapsed timer{&block_s_};
  if (device_limit_ && kind == MemoryKind::kDevice && stats_locked().reserved + size > device_limit_)
    return err(ErrorCode::kOutOfMemory, "vulkan: out of device memory allocating ", asked, " bytes for ", what, " on ",
               ctx_.info().name, ": vrun holds ", stats_locked().reserved, " bytes and VRUN_VK_MEMORY_LIMIT allows ", device_limit_);
  n_blocks_++;
  if (stats_verbose_)
    std::fprintf(stderr, "vulkan stats: new %s memory block of %llu MiB%s for %s\n",
                 kind == MemoryKind::kDevice ? "device" : kind == MemoryKind::kHost ? "host" : "upload",
                 static_cast<unsigned long long>(size >> 20), dedicated ? " (dedicated)" : "", what.c_str());
  const int k = static_cast<int>(kind);
  VkDevice dev = ctx_.device();
  Block b;
  b.size = size;
  b.kind = kind;
  b.dedicated = dedicated;
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = size;
  // Block loads hand the kernels' decode functions device addresses inside these buffers.
  const bool addressed = ctx_.coopmat2().block_loads;
  bi.usage = kUsage | (addressed ? VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT : 0);
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkResult r = vkCreateBuffer(dev, &bi, nullptr, &b.buffer);
  if (r != VK_SUCCESS) return out_of_memory(asked, what, kind);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, b.buffer, &req);
  if (!(req.memoryTypeBits & (1u << type_index_[k]))) {
    vkDestroyBuffer(dev, b.buffer, nullptr);
    return err(ErrorCode::kInternal, "vulkan: storage buffers cannot live in memory type ", type_index_[k]);
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type_index_[k];
  VkMemoryAllocateFlagsInfo af{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  af.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  if (addressed) ai.pNext = &af;
  r = refuse_new_blocks_ ? VK_ERROR_OUT_OF_DEVICE_MEMORY : vkAllocateMemory(dev, &ai, nullptr, &b.memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(dev, b.buffer, nullptr);
    return out_of_memory(asked, what, kind);
  }
  vkBindBufferMemory(dev, b.buffer, b.memory, 0);
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(ctx_.physical_device(), &mem);
  // Only coherent memory is mapped: writes through the mapping then need no flush.
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if ((mem.memoryTypes[type_index_[k]].propertyFlags & hv) == hv) {
    void* p = nullptr;
    if (vkMapMemory(dev, b.memory, 0, VK_WHOLE_SIZE, 0, &p) == VK_SUCCESS) b.mapped = static_cast<uint8_t*>(p);
  }
  b.free[0] = size;
  for (size_t i = 0; i < blocks_.size(); ++i)
    if (!blocks_[i].memory) {
      blocks_[i] = std::move(b);
      return static_cast<int>(i);
    }
  blocks_.push_back(std::move(b));
  return static_cast<int>(blocks_.size() - 1);
}

Result<Buffer> Allocator::allocate(uint64_t bytes, MemoryKind kind, const std::string& what) {
  if (bytes == 0) bytes = 1;
  const uint64_t size = align_up(bytes, alignment_);
  const int k = static_cast<int>(kind);
  // A tensor larger than a block gets memory of its own: refused up front when the driver's
  // budget says it would not fit (asking the driver for the budget costs tens of microseconds
  // on some, so only here, not for every scratch tensor of a call).
  std::lock_guard<std::mutex> lock(mu_);
  if (kind == MemoryKind::kDevice && size > block_size_[k]) {
    const MemoryStats s = stats_locked();
    if (s.heap_usage + size > s.heap_budget) return out_of_memory(bytes, what, kind);
  }
  const AddElapsed timer{&alloc_s_};
  n_allocs_++;
  auto take = [&](int bi) -> Result<Buffer> {
    auto& blk = blocks_[bi];
    for (auto it = blk.free.begin(); it != blk.free.end(); ++it) {
      if (it->second < size) continue;
      const uint64_t off = it->first, rest = it->second - size;
      blk.free.erase(it);
      if (rest) blk.free[off + size] = rest;
      Buffer buf;
      buf.allocator_ = this;
      buf.block_ = bi;
      buf.offset_ = off;
      buf.size_ = size;
      allocated_ += size;
      return buf;
    }
    return err(ErrorCode::kOutOfMemory, "block full");
  };
  if (size <= block_size_[k]) {
    for (size_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].memory && blocks_[i].kind == kind && !blocks_[i].dedicated) {
        auto r = take(static_cast<int>(i));
        if (r.is_ok()) return r;
      }
  }
  const bool dedicated = size > block_size_[k];
  auto bi = new_block(dedicated ? size : block_size_[k], kind, dedicated, what, bytes);
  if (!bi.is_ok()) return bi.status();
  return take(*bi);
}

Status Allocator::reserve(uint64_t bytes, MemoryKind kind, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const int k = static_cast<int>(kind);
  const uint64_t size = std::min(align_up(std::max<uint64_t>(bytes, 1), alignment_), block_size_[k]);
  for (const auto& b : blocks_)
    if (b.memory && b.kind == kind && !b.dedicated)
      for (const auto& [off, n] : b.free)
        if (n >= size) return Status::ok();
  return new_block(block_size_[k], kind, false, what, size).status();
}

void Allocator::free_range(int block, uint64_t offset, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& blk = blocks_[block];
  allocated_ -= size;
  auto it = blk.free.emplace(offset, size).first;
  auto next = std::next(it);
  if (next != blk.free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    blk.free.erase(next);
  }
  if (it != blk.free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      blk.free.erase(it);
    }
  }
  // Dedicated blocks go back to the driver at once: they hold one large tensor.
  if (blk.dedicated && blk.free.size() == 1 && blk.free.begin()->second == blk.size) {
    vkDestroyBuffer(ctx_.device(), blk.buffer, nullptr);
    vkFreeMemory(ctx_.device(), blk.memory, nullptr);
    blk = Block{};
  }
}

}  // namespace vrun::vulkan
