// The host's memory as the operating system reports it.
#pragma once

#include <cstdint>

namespace vrun {

// Memory available to a new allocation without swapping (Linux: MemAvailable, which counts
// reclaimable caches; else the free pages); 0 when unknown.
uint64_t available_host_memory();

}  // namespace vrun
