// The importer's state, shared by the driver (onnx_import.cpp: inputs, folding, If, outputs) and
// the op mappings (onnx_ops*.cpp). Internal to models/onnx.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/onnx/onnx_fold.h"
#include "models/onnx/onnx_import.h"
#include "models/onnx/onnx_ops.h"
#include "runtime/graph/builder.h"

namespace vrun::onnx::detail {

// A graph name's value: known at import (a tensor of numbers) or a value of the method.
struct Value {
  bool known = false;
  Tensor t;
  Val v;
};

inline std::optional<DType> dtype_of(int32_t elem_type) {
  switch (static_cast<ElemType>(elem_type)) {
    case ElemType::kFloat:
      return DType::f32;
    case ElemType::kFloat16:
      return DType::f16;
    case ElemType::kInt64:
      return DType::i64;
    case ElemType::kInt32:
      return DType::i32;
    case ElemType::kBool:
      return DType::bool_;
    default:
      return std::nullopt;
  }
}

class Importer {
 public:
  Importer(const Model& m, const ImportOptions& o) : model_(m), opts_(o), opset_(m.opset()) {}
  Result<std::shared_ptr<Program>> run(const std::string& name);

 private:
  Status add_inputs();
  Status run_graph(const Graph& g);
  Status run_node(const Node& n);
  Status map_node(const Node& n);

  // The op mappings (onnx_ops.cpp's table names each operator's): node n, whose input 0 is x,
  // onto vrun's ops, its outputs set.
  using Mapping = Status (Importer::*)(const Node& n, Val x);
  // Elementwise (onnx_ops_elementwise.cpp).
  Status map_unary(const Node& n, Val x);
  Status map_identity(const Node& n, Val x);
  Status map_hard_sigmoid(const Node& n, Val x);  // and HardSwish
  Status map_gelu(const Node& n, Val x);
  Status map_leaky_relu(const Node& n, Val x);
  Status map_clip(const Node& n, Val x);
  Status map_binary(const Node& n, Val x);
  Status map_where(const Node& n, Val x);
  Status map_cast(const Node& n, Val x);
  // Neural-network layers (onnx_ops_nn.cpp).
  Status map_conv(const Node& n, Val x);
  Status map_max_pool(const Node& n, Val x);
  Status map_global_pool(const Node& n, Val x);
  Status map_reduce(const Node& n, Val x);
  Status map_softmax(const Node& n, Val x);  // and LogSoftmax
  Status map_batch_norm(const Node& n, Val x);
  Status map_matmul(const Node& n, Val x);  // and Gemm
  Status map_lstm(const Node& n, Val x);
  // Shapes and data movement (onnx_ops_shape.cpp).
  Status map_transpose(const Node& n, Val x);
  Status map_reshape(const Node& n, Val x);
  Status map_flatten(const Node& n, Val x);
  Status map_squeeze(const Node& n, Val x);
  Status map_unsqueeze(const Node& n, Val x);
  Status map_concat(const Node& n, Val x);
  Status map_split(const Node& n, Val x);
  Status map_gather(const Node& n, Val x);
  Status map_slice(const Node& n, Val x);
  Status map_pad(const Node& n, Val x);
  Status map_resize(const Node& n, Val x);  // and Upsample
  // Sets the node's first output to v.
  Status set_output(const Node& n, Val v) {
    set(n.outputs.at(0), v);
    return Status::ok();
  }

  // Inputs of a node: present (and defined) or absent.
  const Value* in(const Node& n, size_t k) const {
    if (k >= n.inputs.size() || n.inputs[k].empty()) return nullptr;
    auto it = env_.find(n.inputs[k]);
    return it == env_.end() ? nullptr : &it->second;
  }
  Result<const Tensor*> known_in(const Node& n, size_t k, const char* what) const {
    const Value* v = in(n, k);
    if (!v) return err(ErrorCode::kInvalidProgram, "input ", k, " (", what, ") is missing");
    if (!v->known)
      return err(ErrorCode::kUnsupported, "input ", k, " (", what,
                 ") must be known at import (an initializer or constant)");
    return &v->t;
  }
  // The axes of Squeeze, Unsqueeze and the Reduce ops: input 1 when given (opset 13 / 18 on), else
  // the attribute.
  Result<std::vector<int64_t>> axes_of(const Node& n) const {
    if (!in(n, 1)) return attr_ints(n, "axes", {});
    VRUN_ASSIGN_OR_RETURN(const Tensor* t, known_in(n, 1, "axes"));
    return ints_of(*t);
  }
  Result<Val> val_in(const Node& n, size_t k, DType like = DType::f32);
  Val constant(const Tensor& t, DType dtype);
  void set(const std::string& name, Val v) {
    Value x;
    x.v = v;
    env_[name] = x;
  }
  bool symbolic(Val v) const {
    for (bool b : mb_.symbolic_dims(v))
      if (b) return true;
    return false;
  }
  Shape shape(Val v) const { return mb_.max_shape(v); }
  Result<Val> reshape_keep(Val x, const std::vector<int64_t>& out_dims, const std::vector<int>& src);

  const Model& model_;
  const ImportOptions& opts_;
  int64_t opset_;
  ProgramBuilder pb_;
  MethodBuilder mb_ = pb_.method("forward");
  std::map<std::string, Value> env_;
  std::map<std::string, SymExpr> symbols_;
  std::map<std::string, int> uses_;
  // A MatMul/Gemm turned into linear without bias: its inputs, so an Add of a bias can rebuild it
  // as one linear with bias.
  struct LinearParts {
    Val x, w;
  };
  std::map<std::string, LinearParts> linears_;
  std::map<std::string, std::string> sigmoid_of_;  // Sigmoid output -> its input
  int constants_ = 0;
};

}  // namespace vrun::onnx::detail
