// The containers a NeMo checkpoint nests: a tar archive (the .nemo file, plain or gzip-compressed)
// holding a PyTorch zip checkpoint. Both readers work on bytes in memory (a mapped file or an
// inflated buffer) and hand out spans into them; every header field is bounds-checked against the
// buffer before use, so a truncated or corrupt archive is an error naming the archive and entry.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::torch_ckpt {

// Bytes kept alive by `keep` (a mapping or an owned string).
struct Bytes {
  std::span<const uint8_t> data;
  std::shared_ptr<const void> keep;
};

// Maps the file; if it is gzip-compressed (1f 8b), inflates it into memory instead.
Result<Bytes> read_maybe_gzip(const std::string& path);
// Inflates a gzip stream (several members are concatenated, as gzip does). `source` names it in
// errors; max_bytes bounds the output.
Result<std::string> gunzip(std::span<const uint8_t> gz, const std::string& source, uint64_t max_bytes);

struct ArchiveEntry {
  std::string name;  // without a leading "./"
  std::span<const uint8_t> data;
};

// ustar/GNU/pax tar: regular files only (directories and links are skipped); GNU long names and
// pax `path` records are honoured.
Result<std::vector<ArchiveEntry>> read_tar(std::span<const uint8_t> bytes, const std::string& source);

// deflate cannot compress better than about 1032:1; an entry claiming more is corrupt or hostile.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

// What a zip's deflated entries may inflate to, all together. PyTorch stores its tensors
// uncompressed, so only small entries (data.pkl) are ever deflated in a real checkpoint.
struct ZipLimits {
  uint64_t max_inflated = uint64_t{4} << 30;
};

// A zip archive as PyTorch writes it (stored entries, zip64 where needed); deflated entries are
// inflated into `inflated` (which must outlive the returned spans). An entry whose directory
// sizes pass the ratio or the limit is refused before anything is inflated, and one that inflates
// past the size its directory gives is stopped there.
Result<std::vector<ArchiveEntry>> read_zip(std::span<const uint8_t> bytes, const std::string& source,
                                           std::vector<std::shared_ptr<std::string>>* inflated,
                                           const ZipLimits& limits = {});

}  // namespace vrun::torch_ckpt
