// ONNX graphs onto vrun's op set: a program with one method, "forward", whose inputs and outputs
// carry the graph's names. Everything computable at import (initializers, Constant nodes, shape
// arithmetic, If with a known condition) is folded; what remains maps onto vrun ops. An ONNX op
// with no mapping is an error naming the op, the node and the opset.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "models/onnx/onnx_file.h"
#include "runtime/program.h"

namespace vrun::onnx {

struct ImportOptions {
  // dim_param name -> [min, max]; min == max fixes the dim. Symbolic dims not named here range
  // over [1, default_max].
  std::map<std::string, std::pair<int64_t, int64_t>> dims;
  int64_t default_max = 64;
};

// "NAME=N" or "NAME=MIN:MAX" into options.dims.
Status parse_dim_option(const std::string& text, ImportOptions* options);

bool is_onnx_path(const std::string& path);

Result<std::shared_ptr<Program>> import_onnx(const std::string& path, const ImportOptions& options = {});
Result<std::shared_ptr<Program>> import_onnx_model(const Model& model, const std::string& name,
                                                   const ImportOptions& options = {});

// An .onnx file imported, anything else loaded as a program file (.vrp).
Result<std::shared_ptr<Program>> load_program_or_onnx(const std::string& path, const ImportOptions& options = {});

}  // namespace vrun::onnx
