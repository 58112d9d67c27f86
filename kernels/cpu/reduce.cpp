#include "kernels/cpu/cpu_kernel.h"

namespace vrun {

void register_cpu_reduce(CpuKernelTable& /*t*/) {}

}  // namespace vrun
