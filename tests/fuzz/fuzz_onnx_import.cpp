// libFuzzer target for the ONNX reader and importer: any byte string must import cleanly or be
// refused with a message (seed corpus: tests/data/onnx/*.onnx).
#include <cstdint>

#include "models/onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = vrun::onnx::parse_model(data, size, "fuzz");
  if (!m.is_ok()) {
    if (m.status().message().empty()) __builtin_trap();
    return 0;
  }
  auto p = vrun::onnx::import_onnx_model(*m, "fuzz");
  if (!p.is_ok() && p.status().message().empty()) __builtin_trap();
  return 0;
}
