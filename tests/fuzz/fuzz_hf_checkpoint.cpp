// A Hugging Face Llama-family folder: config.json, model.safetensors (and tokenizer_config.json)
// as parts of one input, split at fuzz_util's marker line, imported as `vrun export` imports it.
#include <cstdint>

#include "models/llama/hf_llama.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  fuzz::write_parts(data, size, {"config.json", "model.safetensors", "tokenizer.json"});
  auto m = llama::import_hf_folder(fuzz::scratch().dir());
  fuzz::require_message(m);
  return 0;
}
