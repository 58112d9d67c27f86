#include "models/torch_ckpt/archive.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "runtime/base/mapped_file.h"

namespace vrun::torch_ckpt {

namespace {

uint64_t rd_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string strip_dot_slash(std::string name) {
  while (name.rfind("./", 0) == 0) name.erase(0, 2);
  return name;
}

// Inflates with the given window bits (16 + 15: gzip, -15: raw deflate) until the stream ends.
Result<std::string> inflate_stream(std::span<const uint8_t> in, int window_bits, const std::string& source,
                                   uint64_t max_bytes, uint64_t size_hint, bool multi_member) {
  std::string out;
  // The hint comes from the file: it is trusted only as far as deflate's ratio allows.
  const uint64_t ratio_bound = in.size() > UINT64_MAX / kMaxDeflateRatio ? UINT64_MAX : in.size() * kMaxDeflateRatio;
  out.reserve(static_cast<size_t>(std::min({size_hint, max_bytes, ratio_bound})));
  size_t pos = 0;
  do {
    z_stream zs{};
    if (inflateInit2(&zs, window_bits) != Z_OK) return err(ErrorCode::kInternal, source, ": zlib init failed");
    zs.next_in = const_cast<Bytef*>(in.data() + pos);
    zs.avail_in = static_cast<uInt>(std::min<size_t>(in.size() - pos, UINT32_MAX));
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
      if (out.size() >= max_bytes) {
        inflateEnd(&zs);
        return err(ErrorCode::kInvalidArgument, source, ": inflates past ", human_bytes(max_bytes));
      }
      const size_t old = out.size();
      // Never past max_bytes: the output stops at the bound instead of overshooting it by a chunk.
      const size_t chunk = std::min<uint64_t>(std::max<size_t>(1 << 20, std::min<size_t>(old, 256u << 20)), max_bytes - old);
      out.resize(old + chunk);
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + old);
      zs.avail_out = static_cast<uInt>(chunk);
      rc = inflate(&zs, Z_NO_FLUSH);
      out.resize(old + chunk - zs.avail_out);
      if (rc == Z_BUF_ERROR && zs.avail_in == 0 && pos + zs.total_in < in.size()) {
        // More than 4 GiB of input: feed the next piece.
        zs.avail_in = static_cast<uInt>(std::min<size_t>(in.size() - pos - zs.total_in, UINT32_MAX));
        continue;
      }
      if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
        inflateEnd(&zs);
        return err(ErrorCode::kInvalidArgument, source, ": compressed data is truncated (", in.size(),
                   " bytes end inside the stream)");
      }
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
        const std::string why = zs.msg ? zs.msg : "error " + std::to_string(rc);
        inflateEnd(&zs);
        return err(ErrorCode::kInvalidArgument, source, ": corrupt compressed data (", why, ")");
      }
    }
    pos += zs.total_in;
    inflateEnd(&zs);
  } while (multi_member && pos + 2 <= in.size() && in[pos] == 0x1f && in[pos + 1] == 0x8b);
  return out;
}

}  // namespace

Result<std::string> gunzip(std::span<const uint8_t> gz, const std::string& source, uint64_t max_bytes) {
  const uint64_t hint = gz.size() >= 4 ? rd_le(gz.data() + gz.size() - 4, 4) : 0;
  return inflate_stream(gz, 16 + MAX_WBITS, source, max_bytes, hint, true);
}

Result<Bytes> read_maybe_gzip(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  Bytes b;
  if (file->size() >= 2 && file->data()[0] == 0x1f && file->data()[1] == 0x8b) {
    // A compressed archive cannot be read in place: at most 64 GiB inflated, as a bound on garbage.
    VRUN_ASSIGN_OR_RETURN(std::string out, gunzip({file->data(), file->size()}, path, uint64_t{64} << 30));
    auto owned = std::make_shared<std::string>(std::move(out));
    b.data = {reinterpret_cast<const uint8_t*>(owned->data()), owned->size()};
    b.keep = owned;
    return b;
  }
  b.data = {file->data(), file->size()};
  b.keep = file;
  return b;
}

// ---- tar

namespace {

Result<uint64_t> tar_number(const uint8_t* f, int len, const std::string& source, uint64_t header_at, const char* what) {
  if (f[0] & 0x80) {  // GNU base-256 for sizes of 8 GiB and more
    uint64_t v = f[0] & 0x3f;
    for (int i = 1; i < len; ++i) {
      if (v >> 55) return err(ErrorCode::kInvalidArgument, source, ": tar header at byte ", header_at, ": ", what, " overflows");
      v = (v << 8) | f[i];
    }
    return v;
  }
  uint64_t v = 0;
  int i = 0;
  while (i < len && (f[i] == ' ' || f[i] == 0)) ++i;
  for (; i < len && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60) return err(ErrorCode::kInvalidArgument, source, ": tar header at byte ", header_at, ": ", what, " overflows");
    v = v * 8 + static_cast<uint64_t>(f[i] - '0');
  }
  for (; i < len; ++i)
    if (f[i] != ' ' && f[i] != 0)
      return err(ErrorCode::kInvalidArgument, source, ": not a tar archive, or corrupt (header at byte ", header_at, ": ", what,
                 " is not an octal number)");
  return v;
}

std::string field(const uint8_t* f, size_t len) {
  size_t n = 0;
  while (n < len && f[n]) ++n;
  return std::string(reinterpret_cast<const char*>(f), n);
}

// "LEN key=value\n" records; returns the path record, if any.
std::string pax_path(std::span<const uint8_t> d) {
  std::string path;
  size_t p = 0;
  while (p < d.size()) {
    size_t sp = p;
    uint64_t len = 0;
    while (sp < d.size() && d[sp] >= '0' && d[sp] <= '9' && len < (uint64_t{1} << 40)) len = len * 10 + (d[sp++] - '0');
    // LEN counts the whole record, its own digits and the space too: one too short to reach past
    // the space is corrupt.
    if (sp >= d.size() || d[sp] != ' ' || len == 0 || p + len > d.size() || p + len <= sp) break;
    const std::string rec(reinterpret_cast<const char*>(d.data() + sp + 1), p + len - sp - 1);
    if (rec.rfind("path=", 0) == 0) path = rec.substr(5, rec.size() - 5 - (rec.back() == '\n' ? 1 : 0));
    p += len;
  }
  return path;
}

}  // namespace

Result<std::vector<ArchiveEntry>> read_tar(std::span<const uint8_t> bytes, const std::string& source) {
  std::vector<ArchiveEntry> entries;
  std::string long_name;
  uint64_t pos = 0;
  const uint64_t n = bytes.size();
  if (n < 512) return err(ErrorCode::kInvalidArgument, source, ": ", n, " bytes is too short for a tar archive");
  while (pos + 512 <= n) {
    const uint8_t* h = bytes.data() + pos;
    if (std::all_of(h, h + 512, [](uint8_t c) { return c == 0; })) break;  // end-of-archive block
    uint64_t sum = 0;
    for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
    VRUN_ASSIGN_OR_RETURN(const uint64_t stored_sum, tar_number(h + 148, 8, source, pos, "checksum"));
    if (sum != stored_sum)
      return err(ErrorCode::kInvalidArgument, source, ": not a tar archive, or corrupt (header at byte ", pos,
                 " has checksum ", stored_sum, ", computed ", sum, ")");
    VRUN_ASSIGN_OR_RETURN(const uint64_t size, tar_number(h + 124, 12, source, pos, "size"));
    const char type = static_cast<char>(h[156]);
    std::string name = field(h, 100);
    if (std::memcmp(h + 257, "ustar", 5) == 0) {
      const std::string prefix = field(h + 345, 155);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    const uint64_t data_at = pos + 512;
    if (size > n - data_at)
      return err(ErrorCode::kInvalidArgument, source, ": truncated tar archive: entry '", name, "' needs ", size,
                 " bytes at byte ", data_at, ", the file has ", n);
    const std::span<const uint8_t> data = bytes.subspan(data_at, size);
    pos = data_at + (size + 511) / 512 * 512;
    if (type == 'L') {  // GNU long name for the next entry
      long_name = field(data.data(), data.size());
      continue;
    }
    if (type == 'x') {
      long_name = pax_path(data);
      continue;
    }
    if (type == 'g') continue;
    if (!long_name.empty()) name = long_name;
    long_name.clear();
    if (type != '0' && type != '\0' && type != '7') continue;  // directories, links, devices
    entries.push_back({strip_dot_slash(name), data});
  }
  if (entries.empty()) return err(ErrorCode::kInvalidArgument, source, ": the tar archive holds no files");
  return entries;
}

// ---- zip

namespace {

constexpr uint32_t kEocd = 0x06054b50, kZip64Locator = 0x07064b50, kZip64Eocd = 0x06064b50;
constexpr uint32_t kCentral = 0x02014b50, kLocal = 0x04034b50;

}  // namespace

Result<std::vector<ArchiveEntry>> read_zip(std::span<const uint8_t> bytes, const std::string& source,
                                           std::vector<std::shared_ptr<std::string>>* inflated, const ZipLimits& limits) {
  uint64_t total_inflated = 0;
  const uint8_t* d = bytes.data();
  const uint64_t n = bytes.size();
  auto bad = [&](auto&&... parts) { return err(ErrorCode::kInvalidArgument, source, ": ", parts...); };
  if (n < 22) return bad("truncated zip archive (", n, " bytes)");
  int64_t eocd = -1;
  for (int64_t p = static_cast<int64_t>(n) - 22; p >= 0 && p >= static_cast<int64_t>(n) - 22 - 65535; --p)
    if (rd_le(d + p, 4) == kEocd) {
      eocd = p;
      break;
    }
  if (eocd < 0) return bad("no zip end-of-directory record (truncated, or not a zip archive)");
  uint64_t count = rd_le(d + eocd + 10, 2), cd_size = rd_le(d + eocd + 12, 4), cd_off = rd_le(d + eocd + 16, 4);
  if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_off == 0xFFFFFFFF) {
    if (eocd < 20 || rd_le(d + eocd - 20, 4) != kZip64Locator) return bad("zip64 archive without its locator");
    const uint64_t z = rd_le(d + eocd - 20 + 8, 8);
    if (z > n || n - z < 56 || rd_le(d + z, 4) != kZip64Eocd) return bad("zip64 end-of-directory record out of range");
    count = rd_le(d + z + 32, 8);
    cd_size = rd_le(d + z + 40, 8);
    cd_off = rd_le(d + z + 48, 8);
  }
  if (cd_off > n || cd_size > n - cd_off) return bad("central directory (", cd_size, " bytes at ", cd_off, ") past the end of ", n, " bytes");
  std::vector<ArchiveEntry> entries;
  uint64_t p = cd_off;
  for (uint64_t i = 0; i < count; ++i) {
    if (p + 46 > cd_off + cd_size || rd_le(d + p, 4) != kCentral) return bad("central directory entry ", i, " is corrupt");
    const uint32_t method = static_cast<uint32_t>(rd_le(d + p + 10, 2));
    uint64_t csize = rd_le(d + p + 20, 4), usize = rd_le(d + p + 24, 4);
    const uint64_t name_len = rd_le(d + p + 28, 2), extra_len = rd_le(d + p + 30, 2), comment_len = rd_le(d + p + 32, 2);
    uint64_t local = rd_le(d + p + 42, 4);
    if (p + 46 + name_len + extra_len + comment_len > cd_off + cd_size) return bad("central directory entry ", i, " overruns the directory");
    std::string name(reinterpret_cast<const char*>(d + p + 46), name_len);
    // zip64 extended information: the fields that overflowed, in this order.
    for (uint64_t e = p + 46 + name_len; e + 4 <= p + 46 + name_len + extra_len;) {
      const uint64_t id = rd_le(d + e, 2), len = rd_le(d + e + 2, 2);
      if (e + 4 + len > p + 46 + name_len + extra_len) break;
      if (id == 1) {
        uint64_t q = e + 4;
        auto take = [&](uint64_t& v) {
          if (v == 0xFFFFFFFF && q + 8 <= e + 4 + len) {
            v = rd_le(d + q, 8);
            q += 8;
          }
        };
        take(usize);
        take(csize);
        take(local);
      }
      e += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    if (local > n || n - local < 30 || rd_le(d + local, 4) != kLocal) return bad("entry '", name, "': local header out of range or corrupt");
    const uint64_t data_at = local + 30 + rd_le(d + local + 26, 2) + rd_le(d + local + 28, 2);
    if (data_at > n || csize > n - data_at)
      return bad("truncated zip archive: entry '", name, "' needs ", csize, " bytes at byte ", data_at, ", the archive has ", n);
    std::span<const uint8_t> data = bytes.subspan(data_at, csize);
    if (method == 8) {
      if (usize / kMaxDeflateRatio > csize)
        return bad("entry '", name, "' claims ", usize, " bytes inflated from ", csize, " (more than deflate's ", kMaxDeflateRatio,
                   ":1 allows; corrupt or a compression bomb)");
      if (usize > limits.max_inflated - std::min(total_inflated, limits.max_inflated))
        return bad("entry '", name, "' inflates to ", human_bytes(usize), ", past the ", human_bytes(limits.max_inflated),
                   " limit on a zip's compressed entries (", human_bytes(total_inflated), " inflated before it)");
      total_inflated += usize;
      VRUN_ASSIGN_OR_RETURN(std::string out, inflate_stream(data, -MAX_WBITS, source + ":" + name, usize + 1, usize, false));
      if (out.size() != usize) return bad("entry '", name, "' inflates to ", out.size(), " bytes, the directory says ", usize);
      auto owned = std::make_shared<std::string>(std::move(out));
      inflated->push_back(owned);
      data = {reinterpret_cast<const uint8_t*>(owned->data()), owned->size()};
    } else if (method != 0) {
      return bad("entry '", name, "' uses compression method ", method, " (stored and deflate are read)");
    } else if (usize != csize) {
      return bad("stored entry '", name, "' has sizes ", csize, " and ", usize);
    }
    if (!name.empty() && name.back() == '/') continue;
    entries.push_back({strip_dot_slash(std::move(name)), data});
  }
  return entries;
}

}  // namespace vrun::torch_ckpt
