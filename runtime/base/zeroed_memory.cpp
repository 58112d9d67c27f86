#include "runtime/base/zeroed_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <utility>

namespace vrun {

namespace {
size_t page_size() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}
}  // namespace

ZeroedMemory::ZeroedMemory(size_t bytes, bool accessible) : size_(bytes), accessible_(accessible) {
  const size_t page = page_size();
  mapped_ = (bytes + page - 1) / page * page;
  if (mapped_ == 0) mapped_ = page;
  // A private anonymous mapping reads zero until written (page-aligned, so any dtype's alignment).
  void* p = accessible ? mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                       : mmap(nullptr, mapped_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    mapped_ = size_ = 0;
    return;
  }
  data_ = static_cast<uint8_t*>(p);
}

ZeroedMemory::~ZeroedMemory() { release(); }

ZeroedMemory::ZeroedMemory(ZeroedMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)),
      accessible_(o.accessible_) {}

ZeroedMemory& ZeroedMemory::operator=(ZeroedMemory&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    accessible_ = o.accessible_;
  }
  return *this;
}

void ZeroedMemory::release() {
  if (data_) munmap(data_, mapped_);
  data_ = nullptr;
  size_ = mapped_ = 0;
}

void ZeroedMemory::zero() {
  if (!data_) return;
  // Dropping a private anonymous mapping's pages makes them read zero on the next touch; should
  // the kernel refuse, write the zeros.
  if (madvise(data_, mapped_, MADV_DONTNEED) != 0 && accessible_) std::memset(data_, 0, mapped_);
}

}  // namespace vrun
