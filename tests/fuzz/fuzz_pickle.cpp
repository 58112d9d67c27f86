// The safe pickle reader (data.pkl of PyTorch checkpoints): any opcode stream is refused with a
// message or read into plain values.
#include <cstdint>

#include "models/torch_ckpt/pickle.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// Walks the value (shared references may repeat; cycles cannot be built by the reader).
size_t walk(const vrun::torch_ckpt::PyRef& o, int depth) {
  if (!o || depth > 200) return 0;
  size_t n = 1 + o->s.size();
  for (const auto& i : o->items) n += walk(i, depth + 1);
  for (const auto& [k, v] : o->dict) n += walk(k, depth + 1) + walk(v, depth + 1);
  (void)vrun::torch_ckpt::py_kind_name(o->kind);
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = vrun::torch_ckpt::read_pickle({data, size}, "fuzz.pkl");
  vrun::fuzz::require_message(p);
  if (p.is_ok()) (void)walk(*p, 0);
  return 0;
}
