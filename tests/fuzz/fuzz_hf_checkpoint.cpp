// A Hugging Face Llama-family folder: config.json, model.safetensors (and tokenizer_config.json)
// as parts of one input, split at fuzz_util's marker line, imported as `vrun export` imports it.
#include <cstdint>

#include "models/llama/hf_llama.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  const auto parts = fuzz::split_parts(data, size);
  auto& s = fuzz::scratch();
  s.clear();
  s.write("config.json", parts[0]);
  if (parts.size() > 1) s.write("model.safetensors", parts[1]);
  if (parts.size() > 2) s.write("tokenizer.json", parts[2]);
  auto m = llama::import_hf_folder(s.dir());
  fuzz::require_message(m);
  return 0;
}
