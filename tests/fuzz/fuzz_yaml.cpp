// NeMo's model_config.yaml: libyaml events to JSON values, then the Parakeet config read from them.
#include <cstdint>
#include <string_view>

#include "models/parakeet/parakeet_config.h"
#include "models/parakeet/yaml_json.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vrun;
  auto j = parakeet::parse_yaml(std::string_view(reinterpret_cast<const char*>(data), size), "model_config.yaml");
  fuzz::require_message(j);
  if (!j.is_ok()) return 0;
  (void)j->dump();
  auto c = parakeet::config_from_nemo(*j, "model_config.yaml");
  fuzz::require_message(c);
  return 0;
}
