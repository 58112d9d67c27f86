// CTranslate2 model.bin: the variable table, aliases and every variable loaded as the Whisper
// importer loads it (int8/int16 with their scales dequantised).
#include <cstdint>
#include <string>

#include "models/ct2/ct2_file.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  auto f = ct2::File::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "model.bin");
  fuzz::require_message(f);
  if (!f.is_ok()) return 0;
  for (const auto& v : (*f)->variables()) {
    if (v.numel() > (1 << 16)) continue;
    auto t = ct2::load_tensor(**f, v.name);
    fuzz::require_message(t);
    auto s = ct2::load_f32(**f, v.name);
    fuzz::require_message(s);
    if (v.shape.empty()) {
      fuzz::require_message((*f)->scalar_int(v.name));
      fuzz::require_message((*f)->scalar_float(v.name));
    }
  }
  for (const auto& [alias, target] : (*f)->aliases()) (void)(*f)->find(alias);
  return 0;
}
