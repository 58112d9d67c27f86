// Op kinds and schemas derived from kernels/ops.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vrun {

enum class OpKind : uint16_t {
#define VRUN_OP(name, family, inputs, outputs, attrs) name,
#include "kernels/ops/ops.def"
#undef VRUN_OP
  kCount
};
constexpr int kNumOps = static_cast<int>(OpKind::kCount);

enum class OpFamily : uint8_t { unary, binary, reduce, norm, linalg, attention, conv, view, data, rnn };
enum class AttrType : uint8_t { kInt, kFloat, kStr, kInts, kFloats };

struct InputSpec {
  std::string name;
  bool optional = false;
  bool variadic = false;
  bool contiguous = false;  // the kernel needs a dense input
};

// An attribute's value: the member its AttrType names.
struct AttrData {
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

// An attribute of an op, its default value (parsed) in the AttrData.
struct AttrSpec : AttrData {
  std::string name;
  AttrType type;
  bool has_default = false;
};

struct OpSchema {
  OpKind kind;
  std::string name;
  OpFamily family;
  std::vector<InputSpec> inputs;
  std::vector<std::string> outputs;
  bool variadic_outputs = false;
  std::vector<AttrSpec> attrs;

  int min_inputs() const;
  // -1 when variadic
  int max_inputs() const;
  const AttrSpec* attr(std::string_view name) const;
  int attr_index(std::string_view name) const;  // -1 when absent
  bool is_view() const { return family == OpFamily::view; }
  // Output 0 is input 0 itself, written in place (slice_update's state, decode_layer's cache): it
  // aliases input 0's storage, and the node is kept though nothing reads it.
  bool writes_input0() const { return kind == OpKind::slice_update || kind == OpKind::decode_layer; }
};

const OpSchema& op_schema(OpKind kind);
std::optional<OpKind> op_from_name(std::string_view name);
inline const char* op_name(OpKind kind) { return op_schema(kind).name.c_str(); }
const char* attr_type_name(AttrType t);
const char* op_family_name(OpFamily f);

}  // namespace vrun
