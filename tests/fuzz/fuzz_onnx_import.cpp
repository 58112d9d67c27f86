// ONNX files through the reader and the importer `vrun run -m model.onnx` uses: any bytes import
// cleanly or are refused with a message.
#include <cstdint>

#include "models/onnx/onnx_import.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  auto m = onnx::parse_model(data, size, "fuzz.onnx");
  fuzz::require_message(m);
  if (!m.is_ok()) return 0;
  auto p = onnx::import_onnx_model(*m, "fuzz.onnx");
  fuzz::require_message(p);
  return 0;
}
