// The run-time switches vrun reads from the environment, in one place (knobs.def lists them with
// what each does; docs/tuning.md explains them).
#pragma once

#include <string>
#include <vector>

namespace vrun {

enum class Knob {
#define VRUN_KNOB(name, group, doc) name,
#include "runtime/base/knobs.def"
#undef VRUN_KNOB
};

// The variable's value, or null when it is unset.
const char* knob_value(Knob k);
// Set to anything but empty or "0".
bool knob_on(Knob k);
// A count a knob sets (1-4096), or 0 when it is unset or out of range.
long knob_count(Knob k);

// vrun's cache folder: VRUN_CACHE, else ~/.cache/vrun ("" when neither is known).
std::string cache_dir();

struct KnobInfo {
  const char* name;
  const char* group;
  const char* doc;
};
const std::vector<KnobInfo>& all_knobs();

}  // namespace vrun
