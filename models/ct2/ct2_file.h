// CTranslate2 `model.bin` files (what faster-whisper and other CTranslate2 users ship): a binary
// version, the spec name and revision, named variables (shape, CTranslate2 dtype id, raw bytes;
// scalars included) and an alias table. The file is memory-mapped; every length and offset is
// checked against the file before anything is read.
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

namespace vrun::ct2 {

// CTranslate2's DataType order (ctranslate2/types.h).
enum class Ct2DType : uint8_t { kFloat32 = 0, kInt8 = 1, kInt16 = 2, kInt32 = 3, kFloat16 = 4, kBFloat16 = 5 };
const char* ct2_dtype_name(Ct2DType t);
int ct2_dtype_size(Ct2DType t);

struct Variable {
  std::string name;
  std::vector<int64_t> shape;
  Ct2DType dtype = Ct2DType::kFloat32;
  const uint8_t* data = nullptr;
  uint64_t bytes = 0;
  int64_t numel() const;
};

class File : public models::CheckpointFile<File> {
 public:
  static Result<std::shared_ptr<File>> open(const std::string& path);

  uint32_t binary_version() const { return version_; }
  const std::string& spec() const { return spec_; }
  uint32_t spec_revision() const { return revision_; }
  const std::vector<Variable>& variables() const { return variables_; }
  // By name or alias; nullptr when absent.
  const Variable* find(const std::string& name) const;
  const std::map<std::string, std::string>& aliases() const { return aliases_; }

  // A scalar variable as an integer / float (any dtype); errors name the variable.
  Result<int64_t> scalar_int(const std::string& name) const;
  Result<double> scalar_float(const std::string& name) const;

 private:
  friend class models::CheckpointFile<File>;
  static Result<std::shared_ptr<File>> parse(std::shared_ptr<const void> storage, const uint8_t* d, size_t size,
                                             const std::string& path);
  std::string spec_;
  uint32_t version_ = 0, revision_ = 0;
  std::vector<Variable> variables_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> aliases_;
};

// A weight in a type vrun runs. Float types are borrowed from the file as they are; int8/int16
// weights with their `<name>_scale` variable (CTranslate2 stores value = q / scale, one scale per
// output row or one for the tensor) are dequantised to f16 (int8) or f32 (int16) into owned memory;
// int32 is converted to f32.
struct Tensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::shared_ptr<const void> keep;
  bool converted = false;  // true when the bytes were converted from the file's type
};
Result<Tensor> load_tensor(const File& file, const std::string& name);
// The same tensor as owned f32 (small vectors: biases, norms, positions).
Result<std::vector<float>> load_f32(const File& file, const std::string& name);

}  // namespace vrun::ct2
