#include "runtime/base/host_memory.h"

#include <cstdio>
#include <cstdlib>

#include <unistd.h>

#include "runtime/base/knobs.h"

namespace vrun {

uint64_t available_host_memory() {
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kb = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
    std::fclose(f);
    if (found) return static_cast<uint64_t>(kb) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

int64_t arena_ceiling_bytes() {
  const char* cap = knob_value(Knob::VRUN_MAX_ARENA_MB);
  if (!cap || !*cap) return -1;
  const long long mb = std::atoll(cap);
  return mb >= 0 ? static_cast<int64_t>(mb) << 20 : -1;
}

}  // namespace vrun
