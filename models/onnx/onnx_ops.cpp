// ONNX operators onto vrun's ops: the mappings for nodes that could not be evaluated at import.
// Each operator has its mapping function, grouped by family in onnx_ops_<family>.cpp.
#include "models/onnx/onnx_importer.h"

namespace vrun::onnx::detail {

Status Importer::map_node(const Node& n) {
  // clang-format off
  static const std::map<std::string, Mapping> kMappings = {
      // onnx_ops_elementwise.cpp
      {"Relu", &Importer::map_unary},
      {"Sigmoid", &Importer::map_unary},
      {"Tanh", &Importer::map_unary},
      {"Exp", &Importer::map_unary},
      {"Log", &Importer::map_unary},
      {"Sqrt", &Importer::map_unary},
      {"Neg", &Importer::map_unary},
      {"Abs", &Importer::map_unary},
      {"Erf", &Importer::map_unary},
      {"Reciprocal", &Importer::map_unary},
      {"Sin", &Importer::map_unary},
      {"Cos", &Importer::map_unary},
      {"Softplus", &Importer::map_unary},
      {"Identity", &Importer::map_identity},
      {"Dropout", &Importer::map_identity},
      {"HardSigmoid", &Importer::map_hard_sigmoid},
      {"HardSwish", &Importer::map_hard_sigmoid},
      {"Gelu", &Importer::map_gelu},
      {"LeakyRelu", &Importer::map_leaky_relu},
      {"Clip", &Importer::map_clip},
      {"Add", &Importer::map_binary},
      {"Sub", &Importer::map_binary},
      {"Mul", &Importer::map_binary},
      {"Div", &Importer::map_binary},
      {"Pow", &Importer::map_binary},
      {"Max", &Importer::map_binary},
      {"Min", &Importer::map_binary},
      {"Equal", &Importer::map_binary},
      {"Less", &Importer::map_binary},
      {"Greater", &Importer::map_binary},
      {"Where", &Importer::map_where},
      {"Cast", &Importer::map_cast},
      // onnx_ops_nn.cpp
      {"Conv", &Importer::map_conv},
      {"MaxPool", &Importer::map_max_pool},
      {"GlobalAveragePool", &Importer::map_global_pool},
      {"GlobalMaxPool", &Importer::map_global_pool},
      {"ReduceMean", &Importer::map_reduce},
      {"ReduceSum", &Importer::map_reduce},
      {"ReduceMax", &Importer::map_reduce},
      {"ReduceMin", &Importer::map_reduce},
      {"Softmax", &Importer::map_softmax},
      {"LogSoftmax", &Importer::map_softmax},
      {"BatchNormalization", &Importer::map_batch_norm},
      {"MatMul", &Importer::map_matmul},
      {"Gemm", &Importer::map_matmul},
      {"LSTM", &Importer::map_lstm},
      // onnx_ops_shape.cpp
      {"Transpose", &Importer::map_transpose},
      {"Reshape", &Importer::map_reshape},
      {"Flatten", &Importer::map_flatten},
      {"Squeeze", &Importer::map_squeeze},
      {"Unsqueeze", &Importer::map_unsqueeze},
      {"Concat", &Importer::map_concat},
      {"Split", &Importer::map_split},
      {"Gather", &Importer::map_gather},
      {"Slice", &Importer::map_slice},
      {"Pad", &Importer::map_pad},
      {"Resize", &Importer::map_resize},
      {"Upsample", &Importer::map_resize}};
  // clang-format on
  const std::string& op = n.op_type;
  if (n.outputs.empty()) return err(ErrorCode::kInvalidProgram, "node has no outputs");
  auto x_known = [&]() { return in(n, 0) && in(n, 0)->known; };
  if (x_known() && op != "Concat" && op != "Add" && op != "Mul" && op != "Sub" && op != "Div" &&
      op != "Pow" && op != "Where" && op != "Equal" && op != "Less" && op != "Greater" && op != "Max" &&
      op != "Min")
    return err(ErrorCode::kUnsupported, "cannot be evaluated at import and its first input is a constant");
  VRUN_ASSIGN_OR_RETURN(Val x, val_in(n, 0));
  auto it = kMappings.find(op);
  if (it == kMappings.end())
    return err(ErrorCode::kUnsupported, "no mapping onto vrun's ops for this operator");
  return (this->*(it->second))(n, x);
}

}  // namespace vrun::onnx::detail
