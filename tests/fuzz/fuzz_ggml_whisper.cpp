// whisper.cpp ggml model files through the importer `vrun transcribe -m ggml-*.bin` runs.
#include <cstdint>
#include <string_view>

#include "models/whisper/ggml_whisper.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  auto& s = fuzz::scratch();
  s.clear();
  const std::string path = s.write("ggml-model.bin", std::string_view(reinterpret_cast<const char*>(data), size));
  if (!whisper::is_ggml_whisper_file(path)) return 0;
  auto m = whisper::import_ggml_whisper(path);
  fuzz::require_message(m);
  return 0;
}
