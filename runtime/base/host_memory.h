// The host's memory as the operating system reports it.
#pragma once

#include <cstdint>

namespace vrun {

// Memory available to a new allocation without swapping (Linux: MemAvailable, which counts
// reclaimable caches; else the free pages); 0 when unknown.
uint64_t available_host_memory();

// VRUN_MAX_ARENA_MB's ceiling on the scratch memory a method may claim, in bytes; -1: none. (What
// a device that reported memory free but would not give it does, for the callers that fall back
// on less.)
int64_t arena_ceiling_bytes();

}  // namespace vrun
