#include "runtime/base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace vrun {
namespace {

// Live mappings by start address, for release_pages().
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, size_t>& registry() {
  static std::map<uintptr_t, size_t> r;
  return r;
}

}  // namespace

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return err(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo, path, ": ", std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return err(ErrorCode::kIo, path, ": not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* addr = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return err(ErrorCode::kIo, path, ": mmap failed: ", std::strerror(e));
    }
    f->addr_ = addr;
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[reinterpret_cast<uintptr_t>(addr)] = f->size_;
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(f));
}

MappedFile::~MappedFile() {
  if (!addr_) return;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(reinterpret_cast<uintptr_t>(addr_));
  }
  munmap(addr_, size_);
}

size_t MappedFile::release_pages(const void* p, size_t n) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p);
  if (!p || n == 0 || begin + n < begin) return 0;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + n) / page * page;
  if (first >= last) return 0;
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().upper_bound(begin);
  if (it == registry().begin()) return 0;
  --it;
  if (begin + n > it->first + it->second) return 0;
  // A private read-only file mapping: dropped pages read back from the file, unchanged.
  if (madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

}  // namespace vrun
