#include "models/safetensors/safetensors_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "runtime/base/mapped_file.h"

namespace vrun::safetensors {

namespace {

// The safetensors library refuses headers over 100 MB; so do we, before parsing.
constexpr uint64_t kMaxHeader = 100u << 20;

std::optional<DType> float_dtype(const std::string& s) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  return std::nullopt;
}

// Bytes per element of every dtype the format defines (so headers of other dtypes are checked too).
int64_t element_bytes(const std::string& s) {
  if (s == "F64" || s == "I64" || s == "U64") return 8;
  if (s == "F32" || s == "I32" || s == "U32") return 4;
  if (s == "F16" || s == "BF16" || s == "I16" || s == "U16") return 2;
  if (s == "I8" || s == "U8" || s == "BOOL" || s == "F8_E4M3" || s == "F8_E5M2") return 1;
  return 0;
}

}  // namespace

int64_t TensorInfo::numel() const { return models::shape_numel(shape); }

const TensorInfo* File::tensor(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<std::shared_ptr<File>> File::open(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(auto map, MappedFile::open(path));
  if (map->size() < 8)
    return err(ErrorCode::kInvalidProgram, path, ": ", map->size(), " bytes is too short for a safetensors file");
  return parse(map, map->data(), map->size(), path);
}

Result<std::shared_ptr<File>> File::parse(std::shared_ptr<const void> storage, const uint8_t* d, size_t size,
                                          const std::string& path) {
  if (size < 8) return err(ErrorCode::kInvalidProgram, path, ": ", size, " bytes is too short for a safetensors file");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | d[i];
  if (header_len > kMaxHeader)
    return err(ErrorCode::kInvalidProgram, path, ": header length ", header_len, " bytes (", human_bytes(header_len),
               ") is over the ", human_bytes(kMaxHeader), " limit on safetensors headers (corrupt or not a safetensors file)");
  if (header_len > size - 8)
    return err(ErrorCode::kInvalidProgram, path, ": header length ", header_len, " exceeds the file's ", size - 8,
               " bytes after the length field (not a safetensors file, or truncated)");
  const char* hp = reinterpret_cast<const char*>(d + 8);
  auto j = nlohmann::json::parse(hp, hp + header_len, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return err(ErrorCode::kInvalidProgram, path, ": the ", header_len, "-byte header is not a JSON object");
  const uint8_t* data = d + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;
  auto f = std::shared_ptr<File>(new File());
  f->path_ = path;
  f->storage_ = std::move(storage);
  for (const auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return err(ErrorCode::kInvalidProgram, path, ": __metadata__ is not an object");
      for (const auto& [k, s] : v.items())
        if (s.is_string()) f->metadata_[k] = s.get<std::string>();
      continue;
    }
    const std::string where = path + ": tensor '" + name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") || !v["shape"].is_array() ||
        !v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
      return err(ErrorCode::kInvalidProgram, where, ": needs dtype (string), shape (array) and data_offsets ([begin, end])");
    TensorInfo t;
    t.name = name;
    t.dtype_name = v["dtype"].get<std::string>();
    t.dtype = float_dtype(t.dtype_name);
    const int64_t eb = element_bytes(t.dtype_name);
    if (eb == 0) return err(ErrorCode::kInvalidProgram, where, ": unknown dtype '", t.dtype_name, "'");
    // Element counts are bounded by the data size, so the running product cannot overflow.
    uint64_t numel = 1;
    for (const auto& dim : v["shape"]) {
      if (!dim.is_number_unsigned()) return err(ErrorCode::kInvalidProgram, where, ": shape entries must be non-negative integers");
      const uint64_t n = dim.get<uint64_t>();
      if (n != 0 && numel > data_size / n)
        return err(ErrorCode::kInvalidProgram, where, ": shape ", v["shape"].dump(), " holds more elements than the file's ",
                   data_size, " data bytes");
      numel *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    const auto& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return err(ErrorCode::kInvalidProgram, where, ": data_offsets must be non-negative integers");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end || t.end > data_size)
      return err(ErrorCode::kInvalidProgram, where, ": data_offsets [", t.begin, ", ", t.end, "] outside the data section of ",
                 data_size, " bytes");
    const uint64_t expect = numel * static_cast<uint64_t>(eb);
    if (t.end - t.begin != expect)
      return err(ErrorCode::kInvalidProgram, where, ": ", t.dtype_name, " ", v["shape"].dump(), " needs ", expect,
                 " bytes but data_offsets [", t.begin, ", ", t.end, "] span ", t.end - t.begin);
    t.data = data + t.begin;
    f->tensors_.push_back(std::move(t));
  }
  // Tensors may not share bytes: a header that overlaps two ranges is lying about one of them.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : f->tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end && by_offset[i]->end > by_offset[i]->begin)
      return err(ErrorCode::kInvalidProgram, path, ": tensors '", by_offset[i - 1]->name, "' [", by_offset[i - 1]->begin, ", ",
                 by_offset[i - 1]->end, "] and '", by_offset[i]->name, "' [", by_offset[i]->begin, ", ", by_offset[i]->end,
                 "] overlap");
  for (size_t i = 0; i < f->tensors_.size(); ++i) f->index_[f->tensors_[i].name] = i;
  return f;
}

}  // namespace vrun::safetensors
