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

long knob_count(Knob k) {
  const char* e = knob_value(k);
  const long v = e ? std::strtol(e, nullptr, 10) : 0;
  return v >= 1 && v <= 4096 ? v : 0;
}

std::string cache_dir() {
  if (const char* c = knob_value(Knob::VRUN_CACHE); c && *c) return c;
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/vrun";
  return "";
}

}  // namespace vrun
