// PyTorch zip checkpoints (model_weights.ckpt inside a .nemo, or a .pt): the zip directory (zip64
// included), deflated entries, data.pkl through the safe pickle reader and the storages it names.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/torch_ckpt/archive.h"
#include "models/torch_ckpt/torch_checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  std::vector<std::shared_ptr<std::string>> inflated;
  auto z = torch_ckpt::read_zip({data, size}, "fuzz.ckpt", &inflated);
  fuzz::require_message(z);
  if (z.is_ok()) {
    uint64_t sum = 0;
    for (const auto& e : *z)
      for (uint8_t b : e.data) sum += b;
    (void)sum;
  }
  auto c = torch_ckpt::read_torch_checkpoint({data, size}, nullptr, "fuzz.ckpt");
  fuzz::require_message(c);
  if (c.is_ok()) {
    for (const auto& [name, t] : c->tensors) {
      const auto* p = static_cast<const uint8_t*>(t.data);
      const int64_t n = dtype_bytes(t.dtype, t.numel());
      uint64_t sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += p[i];
      (void)sum;
    }
  }
  return 0;
}
