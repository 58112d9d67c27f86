// safetensors: the length-prefixed JSON header and every tensor's byte range; each accepted
// tensor's bytes are read in full.
#include <cstdint>
#include <string>

#include "models/safetensors/safetensors_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  auto f = safetensors::File::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
  vrun::fuzz::require_message(f);
  if (!f.is_ok()) return 0;
  uint64_t sum = 0;
  for (const auto& t : (*f)->tensors()) {
    for (uint64_t i = 0; i < t.end - t.begin; ++i) sum += t.data[i];
    if ((*f)->tensor(t.name) != &t && (*f)->tensor(t.name)->name != t.name) __builtin_trap();
  }
  (void)sum;
  return 0;
}
