// Attribute readers and axis helpers the op mappings share (onnx_ops*.cpp). Internal to
// models/onnx.
#pragma once

#include <string>
#include <vector>

#include "models/onnx/onnx_file.h"

namespace vrun::onnx::detail {

inline int64_t attr_i(const Node& n, const char* name, int64_t dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->i : dflt;
}
inline double attr_f(const Node& n, const char* name, double dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->f : dflt;
}
inline std::string attr_s(const Node& n, const char* name, const std::string& dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->s : dflt;
}
inline std::vector<int64_t> attr_ints(const Node& n, const char* name, std::vector<int64_t> dflt) {
  const Attribute* a = n.attr(name);
  return a ? a->ints : dflt;
}

// axis in [-rank, rank) as an index into the dims; -1 when out of range.
inline int norm_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return -1;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace vrun::onnx::detail
