// Attribute values of one node, resolved: defaults from ops.def filled in and symbolic ints
// evaluated. Kernels and shape functions read them by name.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/ops/op_registry.h"

namespace vrun {

struct AttrValue : AttrData {
  bool set = false;  // false: required attribute not given (the verifier refuses that)
};

class Attrs {
 public:
  explicit Attrs(OpKind op);  // every attribute at its default

  OpKind op() const { return op_; }
  const OpSchema& schema() const { return op_schema(op_); }

  int64_t i(std::string_view name) const { return get(name, AttrType::kInt).i; }
  double f(std::string_view name) const { return get(name, AttrType::kFloat).f; }
  const std::string& s(std::string_view name) const { return get(name, AttrType::kStr).s; }
  const std::vector<int64_t>& ints(std::string_view name) const { return get(name, AttrType::kInts).ints; }
  const std::vector<double>& floats(std::string_view name) const { return get(name, AttrType::kFloats).floats; }

  // Setters for builders and tests; the name must be one of the op's attributes.
  Attrs& set_i(std::string_view name, int64_t v);
  Attrs& set_f(std::string_view name, double v);
  Attrs& set_s(std::string_view name, std::string v);
  Attrs& set_ints(std::string_view name, std::vector<int64_t> v);
  Attrs& set_floats(std::string_view name, std::vector<double> v);

  // By schema index (order of ops.def).
  AttrValue& at(int index) { return values_[index]; }
  const AttrValue& at(int index) const { return values_[index]; }
  int size() const { return static_cast<int>(values_.size()); }

 private:
  const AttrValue& get(std::string_view name, AttrType type) const;
  AttrValue& mut(std::string_view name, AttrType type);

  OpKind op_;
  std::vector<AttrValue> values_;
};

}  // namespace vrun
