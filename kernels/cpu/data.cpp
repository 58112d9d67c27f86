#include "kernels/cpu/cpu_kernel.h"

namespace vrun {

void register_cpu_data(CpuKernelTable& /*t*/) {}

}  // namespace vrun
