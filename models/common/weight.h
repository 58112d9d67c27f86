// A checkpoint tensor as the speech importers serve it to their graph builders: dtype, torch-order
// shape and borrowed bytes (kept alive by `keep`), looked up by a canonical name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/base/dtype.h"

namespace vrun::models {

struct Weight {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::shared_ptr<const void> keep;
};

// nullopt: the checkpoint has no tensor of that name.
using WeightSource = std::function<std::optional<Weight>(const std::string& name)>;

// An owned f32 copy of a float tensor (f32, f64, f16 or bf16): small tensors (biases, norms,
// position tables) become f32 constants so elementwise ops see one dtype.
std::vector<float> weight_to_f32(const Weight& w);

}  // namespace vrun::models
