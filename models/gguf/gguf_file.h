// GGUF v2/v3 files (llama.cpp's format): the key/value header, tensor infos and tensor data,
// memory-mapped. Every count, length, offset and size is checked against the file before use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::gguf {

// ggml tensor types by their GGUF codes.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10, Q3_K = 11,
  Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20,
  IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41,
};
const char* ggml_type_name(uint32_t type);
// Elements per block and bytes per block; false for a type this reader does not know.
bool ggml_type_layout(uint32_t type, int64_t* block_elems, int64_t* block_bytes);

// A metadata value: scalars widen to int64/double; arrays keep their element kind.
using Value = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>,
                           std::vector<std::string>>;

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the innermost (contiguous) dimension
  uint32_t type = 0;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t size = 0;    // bytes
  const uint8_t* data = nullptr;
  int64_t numel() const;
};

class File {
 public:
  static Result<std::shared_ptr<File>> open(const std::string& path);

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  const std::map<std::string, Value>& metadata() const { return kv_; }
  const Value* get(const std::string& key) const;
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(const std::string& name) const;
  // Keeps the mapping alive for borrowed tensor bytes.
  std::shared_ptr<const void> keep_alive() const { return mapping_; }

 private:
  std::string path_;
  uint32_t version_ = 0;
  std::map<std::string, Value> kv_;
  std::vector<TensorInfo> tensors_;
  std::shared_ptr<const void> mapping_;
};

}  // namespace vrun::gguf
