// Import-time evaluation of ONNX ops whose inputs are all known (initializers, Constant nodes,
// shapes): the shape arithmetic exporters emit, folded away before the graph reaches vrun.
#pragma once

#include <vector>

#include "models/onnx/onnx_file.h"

namespace vrun::onnx {

bool is_int_type(int32_t t);
// A value as an integer: past int64's range clamped to its ends, NaN as its least (which every use
// refuses as it refuses a negative size or one that large); a tensor's values so.
int64_t int_of(double d);
std::vector<int64_t> ints_of(const Tensor& t);
// Numpy broadcasting of two shapes; error when they do not broadcast.
Result<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// Folds `node` over constant inputs (absent optionals are nullptr). Unsupported: kUnsupported.
Result<std::vector<Tensor>> fold_node(const Node& node, const std::vector<const Tensor*>& in, int64_t opset);

}  // namespace vrun::onnx
