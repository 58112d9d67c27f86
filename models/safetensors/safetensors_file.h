// Hugging Face safetensors files: an 8-byte little-endian header length, a JSON header
// (name -> dtype, shape, data_offsets) and the tensor bytes, memory-mapped. Every offset and size
// in the header is checked against the file and against dtype x shape before anything is read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/common/checkpoint_file.h"
#include "runtime/base/dtype.h"
#include "runtime/base/status.h"

namespace vrun::safetensors {

struct TensorInfo {
  std::string name;
  std::string dtype_name;      // as written in the header: F32, F16, BF16, I64, ...
  std::optional<DType> dtype;  // set for the float types vrun runs (F32, F16, BF16)
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte range, from the start of the data section
  const uint8_t* data = nullptr;
  int64_t numel() const;
};

class File : public models::CheckpointFile<File> {
 public:
  static Result<std::shared_ptr<File>> open(const std::string& path);

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* tensor(const std::string& name) const;
  // The header's free-form "__metadata__" string map.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  friend class models::CheckpointFile<File>;
  static Result<std::shared_ptr<File>> parse(std::shared_ptr<const void> storage, const uint8_t* d, size_t size,
                                             const std::string& path);
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace vrun::safetensors
