#include "kernels/cpu/cpu_kernel.h"

namespace vrun {

void register_cpu_elementwise(CpuKernelTable& /*t*/) {}

}  // namespace vrun
