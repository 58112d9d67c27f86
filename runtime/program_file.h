// The .vrp container: a fixed 64-byte header, the flatbuffer (schema/program.fbs), then the
// page-aligned constant segment.
#pragma once

#include <cstdint>

namespace vrun {

// Bump when the flatbuffer schema changes incompatibly; the loader refuses other versions.
constexpr uint32_t kProgramFormatVersion = 1;
constexpr char kProgramMagic[8] = {'V', 'R', 'U', 'N', 'P', 'R', 'G', '\0'};
constexpr uint64_t kSegmentAlignment = 4096;  // start of the constant segment (mmap page)
constexpr uint64_t kConstantAlignment = 64;   // each constant inside the segment

struct ProgramFileHeader {
  char magic[8];
  uint32_t version;
  uint32_t flags;  // 0
  uint64_t flatbuffer_offset;
  uint64_t flatbuffer_size;
  uint64_t segment_offset;
  uint64_t segment_size;
  uint8_t reserved[16];
};
static_assert(sizeof(ProgramFileHeader) == 64);

}  // namespace vrun
