// A .nemo checkpoint end to end: gzip (or plain) tar, model_config.yaml, the PyTorch zip inside
// with its pickle, and the SentencePiece tokenizer, through the importer the CLI runs.
#include <cstdint>
#include <string_view>

#include "models/parakeet/parakeet_import.h"
#include "models/torch_ckpt/archive.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  std::span<const uint8_t> bytes(data, size);
  // The containers on their own, with a small bound on the inflated size.
  std::string inflated;
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    auto g = torch_ckpt::gunzip(bytes, "fuzz.nemo", 64u << 20);
    fuzz::require_message(g);
    if (g.is_ok()) {
      inflated = std::move(*g);
      bytes = {reinterpret_cast<const uint8_t*>(inflated.data()), inflated.size()};
    }
  }
  auto tar = torch_ckpt::read_tar(bytes, "fuzz.nemo");
  fuzz::require_message(tar);
  if (!tar.is_ok()) return 0;

  auto& s = fuzz::scratch();
  s.clear();
  const std::string path = s.write("model.nemo", std::string_view(reinterpret_cast<const char*>(data), size));
  auto m = parakeet::import_nemo(path);
  fuzz::require_message(m);
  return 0;
}
