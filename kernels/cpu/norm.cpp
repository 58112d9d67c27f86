#include "kernels/cpu/cpu_kernel.h"

namespace vrun {

void register_cpu_norm(CpuKernelTable& /*t*/) {}

}  // namespace vrun
