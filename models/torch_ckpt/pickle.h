// A safe reader for the pickles inside PyTorch zip checkpoints (data.pkl). It is not a Python
// unpickler: it builds plain values (None, bool, int, float, str, bytes, list, tuple, dict) and
// knows a fixed set of globals - collections.OrderedDict, torch._utils._rebuild_tensor_v2 /
// _rebuild_parameter and the torch.*Storage types - with storages named by persistent ids. Any
// other global (os.system, builtins.eval, ...) or opcode is refused with an error naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/base/status.h"

namespace vrun::torch_ckpt {

struct PyObj;
using PyRef = std::shared_ptr<PyObj>;

// A storage reference: ('storage', torch.FloatStorage, key, location, numel).
struct StorageRef {
  std::string type;  // "FloatStorage", "HalfStorage", ...
  std::string key;   // the zip entry data/<key>
  int64_t numel = 0;
};

// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...).
struct TensorRef {
  StorageRef storage;
  int64_t offset = 0;
  std::vector<int64_t> size, stride;
};

struct PyObj {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kBytes, kList, kTuple, kDict, kGlobal, kStorage, kTensor };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                               // str, bytes, global "module.name"
  std::vector<PyRef> items;                    // list, tuple
  std::vector<std::pair<PyRef, PyRef>> dict;   // insertion order
  StorageRef storage;
  TensorRef tensor;
};

// `source` names the pickle in errors.
Result<PyRef> read_pickle(std::span<const uint8_t> bytes, const std::string& source);

const char* py_kind_name(PyObj::Kind k);

}  // namespace vrun::torch_ckpt
