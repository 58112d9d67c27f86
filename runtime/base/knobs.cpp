#include "runtime/base/knobs.h"

#include <cstdlib>
#include <string_view>

namespace vrun {

const std::vector<KnobInfo>& all_knobs() {
  static const std::vector<KnobInfo> k = {
#define VRUN_KNOB(name, group, doc) {#name, group, doc},
#include "runtime/base/knobs.def"
#undef VRUN_KNOB
  };
  return k;
}

const char* knob_value(Knob k) { return std::getenv(all_knobs()[static_cast<size_t>(k)].name); }

bool knob_on(Knob k) {
  const char* v = knob_value(k);
  return v && *v && std::string_view(v) != "0";
}

}  // namespace vrun
