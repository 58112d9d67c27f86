// PyTorch zip checkpoints (torch.save since 1.6): <prefix>/data.pkl names the tensors, their
// storages are the entries <prefix>/data/<key>. Read with the safe pickle reader; tensors point
// into the archive bytes (storages are stored uncompressed), non-contiguous ones are copied.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/torch_ckpt/archive.h"
#include "runtime/base/dtype.h"
#include "runtime/base/status.h"

namespace vrun::torch_ckpt {

struct CkptTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // dense, row-major
  std::shared_ptr<const void> keep;
  int64_t numel() const;
};

struct Checkpoint {
  std::map<std::string, CkptTensor> tensors;
  std::vector<std::string> order;  // as stored
};

// `bytes` must stay alive through `keep`. The top-level object is the state dict, or a dict with a
// "state_dict" entry (Lightning checkpoints).
Result<Checkpoint> read_torch_checkpoint(std::span<const uint8_t> bytes, std::shared_ptr<const void> keep,
                                         const std::string& source);

}  // namespace vrun::torch_ckpt
