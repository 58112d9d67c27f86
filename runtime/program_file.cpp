#include "runtime/program_file.h"

namespace vrun {
static_assert(kProgramFormatVersion >= 1);
}  // namespace vrun
