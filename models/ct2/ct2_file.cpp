#include "models/ct2/ct2_file.h"

#include <cmath>

#include "runtime/base/mapped_file.h"

#include <cerrno>
#include <cstring>

namespace vrun::ct2 {

namespace {

// Bounds-checked little-endian reads; the first failure names what was being read and where.
class Reader {
 public:
  Reader(const uint8_t* d, size_t size, const std::string& path) : d_(d), size_(size), path_(path) {}
  size_t offset() const { return at_; }
  Status need(uint64_t n, const char* what) const {
    if (n > size_ - at_)
      return err(ErrorCode::kInvalidProgram, path_, ": truncated at byte ", at_, " reading ", what, " (", n,
                 " bytes needed, ", size_ - at_, " left)");
    return Status::ok();
  }
  template <typename T>
  Result<T> read(const char* what) {
    VRUN_RETURN_IF_ERROR(need(sizeof(T), what));
    T v;
    std::memcpy(&v, d_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  // u16 length (NUL included), then the bytes.
  Result<std::string> string(const char* what) {
    VRUN_ASSIGN_OR_RETURN(uint16_t n, read<uint16_t>(what));
    if (n == 0) return err(ErrorCode::kInvalidProgram, path_, ": empty ", what, " at byte ", at_ - 2);
    VRUN_RETURN_IF_ERROR(need(n, what));
    const char* s = reinterpret_cast<const char*>(d_ + at_);
    if (s[n - 1] != '\0') return err(ErrorCode::kInvalidProgram, path_, ": ", what, " at byte ", at_, " is not NUL-terminated");
    at_ += n;
    return std::string(s, n - 1);
  }
  const uint8_t* take(uint64_t n) {
    const uint8_t* p = d_ + at_;
    at_ += n;
    return p;
  }

 private:
  const uint8_t* d_;
  size_t size_, at_ = 0;
  const std::string& path_;
};

}  // namespace

const char* ct2_dtype_name(Ct2DType t) {
  switch (t) {
    case Ct2DType::kFloat32: return "float32";
    case Ct2DType::kInt8: return "int8";
    case Ct2DType::kInt16: return "int16";
    case Ct2DType::kInt32: return "int32";
    case Ct2DType::kFloat16: return "float16";
    case Ct2DType::kBFloat16: return "bfloat16";
  }
  return "?";
}

int ct2_dtype_size(Ct2DType t) {
  switch (t) {
    case Ct2DType::kInt8: return 1;
    case Ct2DType::kInt16: case Ct2DType::kFloat16: case Ct2DType::kBFloat16: return 2;
    default: return 4;
  }
}

int64_t Variable::numel() const { return models::shape_numel(shape); }

Result<std::shared_ptr<File>> File::open(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(auto map, MappedFile::open(path));
  if (map->size() == 0) return err(ErrorCode::kInvalidProgram, path, ": empty file");
  return parse(map, map->data(), map->size(), path);
}

Result<std::shared_ptr<File>> File::parse(std::shared_ptr<const void> storage, const uint8_t* d, size_t size,
                                          const std::string& path) {
  auto f = std::shared_ptr<File>(new File());
  f->path_ = path;
  f->storage_ = std::move(storage);
  Reader r(d, size, path);
  VRUN_ASSIGN_OR_RETURN(f->version_, r.read<uint32_t>("the binary version"));
  if (f->version_ < 3 || f->version_ > 6)
    return err(ErrorCode::kUnsupported, path, ": CTranslate2 binary version ", f->version_,
               " (expected 3 to 6; is this a CTranslate2 model.bin?)");
  VRUN_ASSIGN_OR_RETURN(f->spec_, r.string("the spec name"));
  VRUN_ASSIGN_OR_RETURN(f->revision_, r.read<uint32_t>("the spec revision"));
  VRUN_ASSIGN_OR_RETURN(uint32_t count, r.read<uint32_t>("the variable count"));
  // Each variable takes at least 9 bytes, so a count beyond that is corrupt (and must not
  // reserve memory).
  if (count > size / 9) return err(ErrorCode::kInvalidProgram, path, ": ", count, " variables cannot fit in ", size, " bytes");
  f->variables_.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    Variable v;
    VRUN_ASSIGN_OR_RETURN(v.name, r.string("a variable name"));
    VRUN_ASSIGN_OR_RETURN(uint8_t rank, r.read<uint8_t>("a variable rank"));
    if (rank > 8) return err(ErrorCode::kInvalidProgram, path, ": variable '", v.name, "' has rank ", int{rank}, " (at most 8)");
    uint64_t numel = 1;
    for (int k = 0; k < rank; ++k) {
      VRUN_ASSIGN_OR_RETURN(uint32_t dim, r.read<uint32_t>("a variable dimension"));
      if (dim != 0 && numel > (uint64_t{1} << 40) / dim)
        return err(ErrorCode::kInvalidProgram, path, ": variable '", v.name, "' has an impossible shape");
      numel *= dim;
      v.shape.push_back(dim);
    }
    VRUN_ASSIGN_OR_RETURN(uint8_t dt, r.read<uint8_t>("a variable dtype"));
    if (dt > 5)
      return err(ErrorCode::kUnsupported, path, ": variable '", v.name, "' has dtype id ", int{dt},
                 " (CTranslate2 defines 0..5: float32, int8, int16, int32, float16, bfloat16)");
    v.dtype = static_cast<Ct2DType>(dt);
    VRUN_ASSIGN_OR_RETURN(uint32_t bytes, r.read<uint32_t>("a variable byte count"));
    const uint64_t expect = numel * static_cast<uint64_t>(ct2_dtype_size(v.dtype));
    if (bytes != expect)
      return err(ErrorCode::kInvalidProgram, path, ": variable '", v.name, "' holds ", bytes, " bytes; its shape and ",
                 ct2_dtype_name(v.dtype), " need ", expect);
    VRUN_RETURN_IF_ERROR(r.need(bytes, ("the bytes of '" + v.name + "'").c_str()));
    v.bytes = bytes;
    v.data = r.take(bytes);
    if (!f->index_.emplace(v.name, f->variables_.size()).second)
      return err(ErrorCode::kInvalidProgram, path, ": variable '", v.name, "' appears twice");
    f->variables_.push_back(std::move(v));
  }
  {  // every version we accept (3 and later) has the alias table
    VRUN_ASSIGN_OR_RETURN(uint32_t n_alias, r.read<uint32_t>("the alias count"));
    if (n_alias > size / 4) return err(ErrorCode::kInvalidProgram, path, ": ", n_alias, " aliases cannot fit in the file");
    for (uint32_t i = 0; i < n_alias; ++i) {
      VRUN_ASSIGN_OR_RETURN(std::string alias, r.string("an alias name"));
      VRUN_ASSIGN_OR_RETURN(std::string target, r.string("an alias target"));
      if (!f->index_.count(target))
        return err(ErrorCode::kInvalidProgram, path, ": alias '", alias, "' points at '", target, "', which is not a variable");
      f->aliases_[alias] = target;
    }
  }
  if (r.offset() != size)
    return err(ErrorCode::kInvalidProgram, path, ": ", size - r.offset(), " unexpected bytes after the alias table at byte ",
               r.offset());
  return f;
}

const Variable* File::find(const std::string& name) const {
  auto it = index_.find(name);
  if (it != index_.end()) return &variables_[it->second];
  auto a = aliases_.find(name);
  if (a == aliases_.end()) return nullptr;
  it = index_.find(a->second);
  return it == index_.end() ? nullptr : &variables_[it->second];
}

namespace {

double element(const Variable& v, int64_t i) {
  const uint8_t* p = v.data + i * ct2_dtype_size(v.dtype);
  switch (v.dtype) {
    case Ct2DType::kFloat32: { float x; std::memcpy(&x, p, 4); return x; }
    case Ct2DType::kInt8: return static_cast<int8_t>(*p);
    case Ct2DType::kInt16: { int16_t x; std::memcpy(&x, p, 2); return x; }
    case Ct2DType::kInt32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case Ct2DType::kFloat16: { uint16_t x; std::memcpy(&x, p, 2); return f16_to_f32(x); }
    case Ct2DType::kBFloat16: { uint16_t x; std::memcpy(&x, p, 2); return bf16_to_f32(x); }
  }
  return 0;
}

}  // namespace

Result<double> File::scalar_float(const std::string& name) const {
  const Variable* v = find(name);
  if (!v) return err(ErrorCode::kNotFound, path_, ": no variable '", name, "'");
  if (v->numel() != 1) return err(ErrorCode::kInvalidProgram, path_, ": '", name, "' should be a scalar, has ", v->numel(), " elements");
  return element(*v, 0);
}

Result<int64_t> File::scalar_int(const std::string& name) const {
  VRUN_ASSIGN_OR_RETURN(double x, scalar_float(name));
  // A float scalar read as an integer (CTranslate2 stores some as float32) must be a whole number
  // that fits; converting anything else is undefined.
  if (!(x >= -9.2e18 && x <= 9.2e18) || x != std::trunc(x))
    return err(ErrorCode::kInvalidProgram, path_, ": '", name, "' is ", x, ", not an integer");
  return static_cast<int64_t>(x);
}

Result<Tensor> load_tensor(const File& file, const std::string& name) {
  const Variable* v = file.find(name);
  if (!v) return err(ErrorCode::kNotFound, file.path(), ": no variable '", name, "'");
  Tensor t;
  t.shape = v->shape;
  if (v->dtype == Ct2DType::kFloat32 || v->dtype == Ct2DType::kFloat16 || v->dtype == Ct2DType::kBFloat16) {
    t.dtype = v->dtype == Ct2DType::kFloat32 ? DType::f32 : v->dtype == Ct2DType::kFloat16 ? DType::f16 : DType::bf16;
    t.data = v->data;
    t.keep = file.keep_alive();
    return t;
  }
  const int64_t n = v->numel();
  std::vector<double> scale;
  if (v->dtype == Ct2DType::kInt8 || v->dtype == Ct2DType::kInt16) {
    const Variable* s = file.find(name + "_scale");
    if (!s) return err(ErrorCode::kNotFound, file.path(), ": ", ct2_dtype_name(v->dtype), " variable '", name, "' has no '", name, "_scale'");
    const int64_t rows = v->shape.empty() ? 1 : v->shape[0];
    if (s->numel() != 1 && s->numel() != rows)
      return err(ErrorCode::kInvalidProgram, file.path(), ": '", name, "_scale' has ", s->numel(), " elements; expected 1 or ", rows, " (rows of '", name, "')");
    for (int64_t i = 0; i < s->numel(); ++i) {
      scale.push_back(element(*s, i));
      if (!(scale.back() != 0.0))
        return err(ErrorCode::kInvalidProgram, file.path(), ": '", name, "_scale' element ", i, " is ", scale.back());
    }
  }
  const int64_t per_row = scale.size() > 1 ? n / static_cast<int64_t>(scale.size()) : n;
  auto value = [&](int64_t i) {
    const double x = element(*v, i);
    return scale.empty() ? x : x / scale[scale.size() > 1 ? static_cast<size_t>(i / per_row) : 0];
  };
  t.converted = true;
  if (v->dtype == Ct2DType::kInt8) {
    auto buf = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) (*buf)[static_cast<size_t>(i)] = f32_to_f16(static_cast<float>(value(i)));
    t.dtype = DType::f16;
    t.data = buf->data();
    t.keep = buf;
  } else {
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) (*buf)[static_cast<size_t>(i)] = static_cast<float>(value(i));
    t.dtype = DType::f32;
    t.data = buf->data();
    t.keep = buf;
  }
  return t;
}

Result<std::vector<float>> load_f32(const File& file, const std::string& name) {
  VRUN_ASSIGN_OR_RETURN(Tensor t, load_tensor(file, name));
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype == DType::f32) {
      std::memcpy(&out[static_cast<size_t>(i)], static_cast<const uint8_t*>(t.data) + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, static_cast<const uint8_t*>(t.data) + 2 * i, 2);
      out[static_cast<size_t>(i)] = t.dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
  }
  return out;
}

}  // namespace vrun::ct2
