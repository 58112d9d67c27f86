#include "apps/common/tokenizer/gguf_metadata.h"

#include <cstring>
#include <fstream>

namespace vrun::tok {

namespace {

enum GgufType : uint32_t { kU8, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

class Cursor {
 public:
  Cursor(std::string_view b, const std::string& source) : b_(b), source_(source) {}
  bool short_read() const { return short_; }
  uint64_t left() const { return b_.size() - pos_; }
  // An array count the bytes left cannot hold (a read of more of the file may still hold them).
  Status too_many(uint64_t n, const std::string& key) {
    short_ = true;
    return err(ErrorCode::kInvalidProgram, source_, ": GGUF array '", key, "' claims ", n, " elements at byte ", pos_,
               ", more than the ", left(), " bytes left can hold (the header ends inside it)");
  }

  Status need(uint64_t n, const char* what) {
    if (n > b_.size() - pos_) {
      short_ = true;
      return err(ErrorCode::kInvalidProgram, source_, ": GGUF header ends inside ", what, " at byte ", pos_);
    }
    return Status::ok();
  }
  template <typename T>
  Result<T> read(const char* what) {
    VRUN_RETURN_IF_ERROR(need(sizeof(T), what));
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  Result<std::string> read_string(const char* what) {
    VRUN_ASSIGN_OR_RETURN(uint64_t n, read<uint64_t>(what));
    if (n > b_.size() - pos_) {
      short_ = true;
      return err(ErrorCode::kInvalidProgram, source_, ": GGUF ", what, " claims a string of ", n, " bytes at byte ", pos_,
                 " but only ", b_.size() - pos_, " remain (the header ends inside it)");
    }
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  // Scalar of a numeric or bool type, widened.
  Result<MetadataMap::Value> read_scalar(uint32_t type, const std::string& key) {
    switch (type) {
      case kU8: { VRUN_ASSIGN_OR_RETURN(auto v, read<uint8_t>(key.c_str())); return MetadataMap::Value(int64_t{v}); }
      case kI8: { VRUN_ASSIGN_OR_RETURN(auto v, read<int8_t>(key.c_str())); return MetadataMap::Value(int64_t{v}); }
      case kBool: { VRUN_ASSIGN_OR_RETURN(auto v, read<uint8_t>(key.c_str())); return MetadataMap::Value(int64_t{v != 0}); }
      case kU16: { VRUN_ASSIGN_OR_RETURN(auto v, read<uint16_t>(key.c_str())); return MetadataMap::Value(int64_t{v}); }
      case kI16: { VRUN_ASSIGN_OR_RETURN(auto v, read<int16_t>(key.c_str())); return MetadataMap::Value(int64_t{v}); }
      case kU32: { VRUN_ASSIGN_OR_RETURN(auto v, read<uint32_t>(key.c_str())); return MetadataMap::Value(int64_t{v}); }
      case kI32: { VRUN_ASSIGN_OR_RETURN(auto v, read<int32_t>(key.c_str())); return MetadataMap::Value(int64_t{v}); }
      case kU64: { VRUN_ASSIGN_OR_RETURN(auto v, read<uint64_t>(key.c_str())); return MetadataMap::Value(static_cast<int64_t>(v)); }
      case kI64: { VRUN_ASSIGN_OR_RETURN(auto v, read<int64_t>(key.c_str())); return MetadataMap::Value(v); }
      case kF32: { VRUN_ASSIGN_OR_RETURN(auto v, read<float>(key.c_str())); return MetadataMap::Value(double{v}); }
      case kF64: { VRUN_ASSIGN_OR_RETURN(auto v, read<double>(key.c_str())); return MetadataMap::Value(v); }
      case kString: { VRUN_ASSIGN_OR_RETURN(auto v, read_string(key.c_str())); return MetadataMap::Value(std::move(v)); }
      default:
        return err(ErrorCode::kInvalidProgram, source_, ": GGUF key '", key, "' has unknown value type ", type);
    }
  }

 private:
  std::string_view b_;
  const std::string& source_;
  size_t pos_ = 0;
  bool short_ = false;
};

// n elements of type elem, each as read_scalar reads it (widened to T).
template <typename T>
Result<std::vector<T>> read_array(Cursor& c, uint32_t elem, const std::string& key, uint64_t n) {
  std::vector<T> v;
  v.reserve(n);
  for (uint64_t k = 0; k < n; ++k) {
    VRUN_ASSIGN_OR_RETURN(auto x, c.read_scalar(elem, key));
    v.push_back(std::get<T>(std::move(x)));
  }
  return v;
}

Result<MetadataMap> parse(Cursor& c, const std::string& source) {
  VRUN_ASSIGN_OR_RETURN(uint32_t magic, c.read<uint32_t>("magic"));
  if (magic != 0x46554747u) return err(ErrorCode::kInvalidProgram, source, ": not a GGUF file (magic is not 'GGUF')");
  VRUN_ASSIGN_OR_RETURN(uint32_t version, c.read<uint32_t>("version"));
  if (version < 2 || version > 3) return err(ErrorCode::kUnsupported, source, ": GGUF version ", version, " (2 and 3 are supported)");
  VRUN_ASSIGN_OR_RETURN(uint64_t n_tensors, c.read<uint64_t>("tensor count"));
  (void)n_tensors;
  VRUN_ASSIGN_OR_RETURN(uint64_t n_kv, c.read<uint64_t>("key count"));
  MetadataMap meta;
  for (uint64_t i = 0; i < n_kv; ++i) {
    VRUN_ASSIGN_OR_RETURN(std::string key, c.read_string("key"));
    VRUN_ASSIGN_OR_RETURN(uint32_t type, c.read<uint32_t>(key.c_str()));
    if (type != kArray) {
      VRUN_ASSIGN_OR_RETURN(auto value, c.read_scalar(type, key));
      meta.set(std::move(key), std::move(value));
      continue;
    }
    VRUN_ASSIGN_OR_RETURN(uint32_t elem, c.read<uint32_t>(key.c_str()));
    VRUN_ASSIGN_OR_RETURN(uint64_t n, c.read<uint64_t>(key.c_str()));
    // Every element takes at least its scalar size (a string its 8-byte length): checking n first
    // keeps a corrupt count from reserving memory the file cannot back.
    const uint64_t min_bytes = elem == kString ? 8 : elem == kU16 || elem == kI16 ? 2
                               : elem == kU32 || elem == kI32 || elem == kF32 ? 4
                               : elem == kU64 || elem == kI64 || elem == kF64 ? 8 : 1;
    if (n > c.left() / min_bytes) return c.too_many(n, key);
    if (elem == kArray) return err(ErrorCode::kUnsupported, source, ": GGUF key '", key, "' is a nested array");
    MetadataMap::Value array;
    if (elem == kString) {
      VRUN_ASSIGN_OR_RETURN(array, read_array<std::string>(c, elem, key, n));
    } else if (elem == kF32 || elem == kF64) {
      VRUN_ASSIGN_OR_RETURN(array, read_array<double>(c, elem, key, n));
    } else {
      VRUN_ASSIGN_OR_RETURN(array, read_array<int64_t>(c, elem, key, n));
    }
    meta.set(std::move(key), std::move(array));
  }
  return meta;
}

}  // namespace

Result<MetadataMap> parse_gguf_metadata(std::string_view bytes, const std::string& source, bool* needs_more) {
  Cursor c(bytes, source);
  auto result = parse(c, source);
  if (needs_more) *needs_more = !result.is_ok() && c.short_read();
  return result;
}

Result<MetadataMap> read_gguf_metadata(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return err(ErrorCode::kIo, path, ": cannot open");
  const auto file_size = static_cast<size_t>(in.tellg());
  std::string buf;
  size_t want = std::min<size_t>(file_size, 4u << 20);
  for (;;) {
    buf.resize(want);
    in.seekg(0);
    if (!in.read(buf.data(), static_cast<std::streamsize>(want))) return err(ErrorCode::kIo, path, ": read failed");
    bool more = false;
    auto meta = parse_gguf_metadata(buf, path, &more);
    if (meta.is_ok() || !more || want == file_size) return meta;
    want = std::min(file_size, want * 4);
  }
}

}  // namespace vrun::tok
