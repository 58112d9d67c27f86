// ONNX models (ModelProto, protobuf wire format) read by a small reader of our own: only the
// fields an importer needs (graph, nodes, attributes, initializers, inputs/outputs, opsets).
// The bytes are untrusted: every length, tag and count is checked against the buffer, nesting
// is bounded, and tensor payloads are checked against dtype x dims before they are decoded.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::onnx {

// TensorProto.DataType values vrun reads.
enum class ElemType : int32_t {
  kUndefined = 0, kFloat = 1, kUint8 = 2, kInt8 = 3, kInt32 = 6, kInt64 = 7, kBool = 9, kFloat16 = 10, kDouble = 11
};
const char* elem_type_name(int32_t t);

// A tensor's values, decoded to doubles (exact for every integer a shape or index holds, and for
// f32/f16 weights).
struct Tensor {
  std::string name;
  int32_t elem_type = 0;
  std::vector<int64_t> dims;
  std::vector<double> values;
  int64_t numel() const;
};

struct Graph;

struct Attribute {
  enum class Type { kUndefined = 0, kFloat = 1, kInt = 2, kString = 3, kTensor = 4, kGraph = 5, kFloats = 6, kInts = 7, kStrings = 8 };
  std::string name;
  Type type = Type::kUndefined;
  double f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<double> floats;
  std::vector<int64_t> ints;
};

struct Node {
  std::string name, op_type, domain;
  std::vector<std::string> inputs, outputs;  // "" = an absent optional
  std::vector<Attribute> attributes;
  const Attribute* attr(const std::string& n) const;
};

// One dim of a graph input: a size, or a named symbol (dim_param), or unknown (neither).
struct Dim {
  int64_t value = -1;
  std::string param;
};

struct ValueInfo {
  std::string name;
  int32_t elem_type = 0;
  bool has_shape = false;
  std::vector<Dim> dims;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<Tensor> initializers;
  std::vector<ValueInfo> inputs, outputs;
};

struct Model {
  int64_t ir_version = 0;
  std::string producer;
  std::map<std::string, int64_t> opsets;  // domain ("" = ai.onnx) -> version
  Graph graph;
  int64_t opset() const;  // the default domain's
};

// Parses a ModelProto held in memory; `name` is used in messages.
Result<Model> parse_model(const uint8_t* data, size_t size, const std::string& name);
Result<Model> read_model(const std::string& path);

}  // namespace vrun::onnx
