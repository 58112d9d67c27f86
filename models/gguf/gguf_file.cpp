#include "models/gguf/gguf_file.h"

#include "models/common/checkpoint_file.h"
#include "runtime/base/mapped_file.h"

#include <cerrno>
#include <cstring>

namespace vrun::gguf {

const char* ggml_type_name(uint32_t t) {
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::F32: return "f32";
    case GgmlType::F16: return "f16";
    case GgmlType::Q4_0: return "q4_0";
    case GgmlType::Q4_1: return "q4_1";
    case GgmlType::Q5_0: return "q5_0";
    case GgmlType::Q5_1: return "q5_1";
    case GgmlType::Q8_0: return "q8_0";
    case GgmlType::Q8_1: return "q8_1";
    case GgmlType::Q2_K: return "q2_K";
    case GgmlType::Q3_K: return "q3_K";
    case GgmlType::Q4_K: return "q4_K";
    case GgmlType::Q5_K: return "q5_K";
    case GgmlType::Q6_K: return "q6_K";
    case GgmlType::Q8_K: return "q8_K";
    case GgmlType::I8: return "i8";
    case GgmlType::I16: return "i16";
    case GgmlType::I32: return "i32";
    case GgmlType::I64: return "i64";
    case GgmlType::F64: return "f64";
    case GgmlType::BF16: return "bf16";
    case GgmlType::IQ2_XXS: return "iq2_xxs";
    case GgmlType::IQ2_XS: return "iq2_xs";
    case GgmlType::IQ3_XXS: return "iq3_xxs";
    case GgmlType::IQ1_S: return "iq1_s";
    case GgmlType::IQ4_NL: return "iq4_nl";
    case GgmlType::IQ3_S: return "iq3_s";
    case GgmlType::IQ2_S: return "iq2_s";
    case GgmlType::IQ4_XS: return "iq4_xs";
    case GgmlType::IQ1_M: return "iq1_m";
    case GgmlType::TQ1_0: return "tq1_0";
    case GgmlType::TQ2_0: return "tq2_0";
    case GgmlType::MXFP4: return "mxfp4";
    case GgmlType::NVFP4: return "nvfp4";
    case GgmlType::Q1_0: return "q1_0";
  }
  return "unknown";
}

bool ggml_type_layout(uint32_t t, int64_t* be, int64_t* bb) {
  struct L {
    uint32_t t;
    int64_t e, b;
  };
  static constexpr L kLayouts[] = {
      {0, 1, 4},     {1, 1, 2},     {2, 32, 18},   {3, 32, 20},   {6, 32, 22},   {7, 32, 24},  {8, 32, 34},
      {9, 32, 36},   {10, 256, 84}, {11, 256, 110}, {12, 256, 144}, {13, 256, 176}, {14, 256, 210}, {15, 256, 292},
      {16, 256, 66}, {17, 256, 74}, {18, 256, 98}, {19, 256, 50},  {20, 32, 18},   {21, 256, 110}, {22, 256, 82},
      {23, 256, 136}, {24, 1, 1},   {25, 1, 2},    {26, 1, 4},    {27, 1, 8},    {28, 1, 8},    {29, 256, 56},
      {30, 1, 2},    {34, 256, 54}, {35, 256, 66}, {39, 32, 17},  {40, 64, 36},   {41, 128, 18},
  };
  for (const L& l : kLayouts)
    if (l.t == t) {
      *be = l.e;
      *bb = l.b;
      return true;
    }
  return false;
}

int64_t TensorInfo::numel() const { return models::shape_numel(ne); }

namespace {

class Cursor {
 public:
  Cursor(const uint8_t* d, uint64_t n, const std::string& path) : d_(d), n_(n), path_(path) {}
  template <typename T>
  Status read(T* v, const char* what) {
    if (sizeof(T) > n_ - pos_) return short_read(what);
    std::memcpy(v, d_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::ok();
  }
  Status read_string(std::string* s, const char* what) {
    uint64_t len = 0;
    VRUN_RETURN_IF_ERROR(read(&len, what));
    if (len > n_ - pos_)
      return err(ErrorCode::kInvalidProgram, path_, ": ", what, " claims a string of ", len, " bytes at offset ", pos_,
                 " but the file ends first (truncated?)");
    s->assign(reinterpret_cast<const char*>(d_ + pos_), len);
    pos_ += len;
    return Status::ok();
  }
  Status short_read(const char* what) const {
    return err(ErrorCode::kInvalidProgram, path_, ": file ends inside ", what, " at offset ", pos_, " (truncated GGUF?)");
  }
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return n_ - pos_; }

 private:
  const uint8_t* d_;
  uint64_t n_, pos_ = 0;
  const std::string& path_;
};

enum : uint32_t { kU8 = 0, kI8, kU16, kI16, kU32, kI32, kF32, kBool, kString, kArray, kU64, kI64, kF64 };

// One T from the file, stored in *out as U.
template <typename T, typename U>
Status read_as(Cursor& c, Value* out, const std::string& key) {
  T v{};
  VRUN_RETURN_IF_ERROR(c.read(&v, key.c_str()));
  *out = static_cast<U>(v);
  return Status::ok();
}

Status read_scalar(Cursor& c, uint32_t type, Value* out, const std::string& key, const std::string& path) {
  switch (type) {
    case kU8: return read_as<uint8_t, int64_t>(c, out, key);
    case kI8: return read_as<int8_t, int64_t>(c, out, key);
    case kU16: return read_as<uint16_t, int64_t>(c, out, key);
    case kI16: return read_as<int16_t, int64_t>(c, out, key);
    case kU32: return read_as<uint32_t, int64_t>(c, out, key);
    case kI32: return read_as<int32_t, int64_t>(c, out, key);
    case kU64: return read_as<uint64_t, int64_t>(c, out, key);
    case kI64: return read_as<int64_t, int64_t>(c, out, key);
    case kF32: return read_as<float, double>(c, out, key);
    case kF64: return read_as<double, double>(c, out, key);
    case kBool: return read_as<uint8_t, bool>(c, out, key);
    case kString: {
      std::string s;
      VRUN_RETURN_IF_ERROR(c.read_string(&s, key.c_str()));
      *out = std::move(s);
      return Status::ok();
    }
    default:
      return err(ErrorCode::kInvalidProgram, path, ": metadata '", key, "' has unknown value type ", type);
  }
}

Status read_value(Cursor& c, Value* out, const std::string& key, const std::string& path) {
  uint32_t type = 0;
  VRUN_RETURN_IF_ERROR(c.read(&type, key.c_str()));
  if (type != kArray) return read_scalar(c, type, out, key, path);
  uint32_t et = 0;
  uint64_t n = 0;
  VRUN_RETURN_IF_ERROR(c.read(&et, key.c_str()));
  VRUN_RETURN_IF_ERROR(c.read(&n, key.c_str()));
  // Each element takes at least its scalar size (a string its 8-byte length) in the file: a count
  // the remaining bytes cannot hold is refused before anything is allocated for it.
  const uint64_t min_bytes = et == kString ? 8 : et == kU16 || et == kI16 ? 2 : et == kU32 || et == kI32 || et == kF32 ? 4
                             : et == kU64 || et == kI64 || et == kF64 ? 8 : 1;
  if (n > c.left() / min_bytes)
    return err(ErrorCode::kInvalidProgram, path, ": array '", key, "' claims ", n, " elements, more than the ", c.left(),
               " bytes left in the file can hold");
  if (et == kString) {
    std::vector<std::string> v;
    v.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      std::string s;
      VRUN_RETURN_IF_ERROR(c.read_string(&s, key.c_str()));
      v.push_back(std::move(s));
    }
    *out = std::move(v);
  } else if (et == kF32 || et == kF64) {
    std::vector<double> v;
    v.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      Value e;
      VRUN_RETURN_IF_ERROR(read_scalar(c, et, &e, key, path));
      v.push_back(std::get<double>(e));
    }
    *out = std::move(v);
  } else if (et == kArray) {
    return err(ErrorCode::kUnsupported, path, ": nested array in metadata '", key, "'");
  } else {
    std::vector<int64_t> v;
    v.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      Value e;
      VRUN_RETURN_IF_ERROR(read_scalar(c, et, &e, key, path));
      if (auto* b = std::get_if<bool>(&e)) v.push_back(*b);
      else if (auto* iv = std::get_if<int64_t>(&e)) v.push_back(*iv);
      else return err(ErrorCode::kInvalidProgram, path, ": array '", key, "' has element type ", et);
    }
    *out = std::move(v);
  }
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<File>> File::open(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(auto map, MappedFile::open(path));
  if (map->size() < 24)
    return err(ErrorCode::kInvalidProgram, path, ": ", map->size(), " bytes is too short for a GGUF file");
  const uint8_t* d = map->data();
  if (std::memcmp(d, "GGUF", 4) != 0) return err(ErrorCode::kInvalidProgram, path, ": not a GGUF file (bad magic)");
  auto f = std::shared_ptr<File>(new File());
  f->path_ = path;
  f->mapping_ = map;
  Cursor c(d + 4, map->size() - 4, path);
  VRUN_RETURN_IF_ERROR(c.read(&f->version_, "version"));
  if (f->version_ != 2 && f->version_ != 3)
    return err(ErrorCode::kUnsupported, path, ": GGUF version ", f->version_, " (this reader handles 2 and 3)");
  uint64_t n_tensors = 0, n_kv = 0;
  VRUN_RETURN_IF_ERROR(c.read(&n_tensors, "tensor count"));
  VRUN_RETURN_IF_ERROR(c.read(&n_kv, "metadata count"));
  // A metadata entry takes at least 12 bytes (key length, value type), a tensor entry 24 (name
  // length, rank, type, offset).
  if (n_kv > c.left() / 12 || n_tensors > c.left() / 24)
    return err(ErrorCode::kInvalidProgram, path, ": header claims ", n_kv, " metadata entries and ", n_tensors,
               " tensors, more than the file's ", map->size(), " bytes can hold");
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    VRUN_RETURN_IF_ERROR(c.read_string(&key, "metadata key"));
    Value v;
    VRUN_RETURN_IF_ERROR(read_value(c, &v, key, path));
    f->kv_[key] = std::move(v);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    VRUN_RETURN_IF_ERROR(c.read_string(&t.name, "tensor name"));
    uint32_t nd = 0;
    VRUN_RETURN_IF_ERROR(c.read(&nd, "tensor rank"));
    if (nd > 8) return err(ErrorCode::kInvalidProgram, path, ": tensor '", t.name, "' has rank ", nd);
    for (uint32_t k = 0; k < nd; ++k) {
      uint64_t ne = 0;
      VRUN_RETURN_IF_ERROR(c.read(&ne, "tensor dims"));
      if (ne > (uint64_t{1} << 40)) return err(ErrorCode::kInvalidProgram, path, ": tensor '", t.name, "' dim ", k, " is ", ne);
      t.ne.push_back(static_cast<int64_t>(ne));
    }
    VRUN_RETURN_IF_ERROR(c.read(&t.type, "tensor type"));
    VRUN_RETURN_IF_ERROR(c.read(&t.offset, "tensor offset"));
    f->tensors_.push_back(std::move(t));
  }
  uint64_t align = 32;
  if (auto a = f->get_int("general.alignment")) {
    if (*a <= 0 || (*a & (*a - 1))) return err(ErrorCode::kInvalidProgram, path, ": general.alignment ", *a, " is not a power of two");
    align = static_cast<uint64_t>(*a);
  }
  const uint64_t data_start = (4 + c.pos() + align - 1) / align * align;
  if (data_start > map->size()) return err(ErrorCode::kInvalidProgram, path, ": tensor data would start past the end of the file (truncated?)");
  const uint64_t data_size = map->size() - data_start;
  for (TensorInfo& t : f->tensors_) {
    int64_t be, bb;
    if (!ggml_type_layout(t.type, &be, &bb))
      return err(ErrorCode::kUnsupported, path, ": tensor '", t.name, "' has unknown ggml type ", t.type);
    int64_t n = 1;
    for (int64_t d : t.ne) {
      if (d && n > (int64_t{1} << 48) / d) return err(ErrorCode::kInvalidProgram, path, ": tensor '", t.name, "' is impossibly large");
      n *= d;
    }
    if (t.ne.empty() || t.ne[0] % be)
      return err(ErrorCode::kInvalidProgram, path, ": tensor '", t.name, "' rows of ", t.ne.empty() ? 0 : t.ne[0],
                 " are not whole ", ggml_type_name(t.type), " blocks of ", be);
    t.size = static_cast<uint64_t>(n / be * bb);
    if (t.offset % align || t.offset > data_size || t.size > data_size - t.offset)
      return err(ErrorCode::kInvalidProgram, path, ": tensor '", t.name, "' bytes [", t.offset, ", +", t.size,
                 ") lie outside the ", data_size, "-byte data section (truncated?)");
    t.data = d + data_start + t.offset;
  }
  return f;
}

const Value* File::get(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<int64_t> File::get_int(const std::string& key) const {
  const Value* v = get(key);
  if (!v) return std::nullopt;
  if (auto* i = std::get_if<int64_t>(v)) return *i;
  if (auto* b = std::get_if<bool>(v)) return *b ? 1 : 0;
  return std::nullopt;
}

std::optional<double> File::get_float(const std::string& key) const {
  const Value* v = get(key);
  if (!v) return std::nullopt;
  if (auto* d = std::get_if<double>(v)) return *d;
  if (auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<std::string> File::get_string(const std::string& key) const {
  const Value* v = get(key);
  if (!v) return std::nullopt;
  if (auto* s = std::get_if<std::string>(v)) return *s;
  return std::nullopt;
}

const TensorInfo* File::tensor(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace vrun::gguf
