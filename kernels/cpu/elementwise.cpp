// The unary and binary families register together (cpu_kernel.h); their kernels live in
// unary.cpp and binary.cpp.
#include "kernels/cpu/cpu_kernel.h"

namespace vrun {

namespace cpu {
void register_cpu_unary(CpuKernelTable& t);
void register_cpu_binary(CpuKernelTable& t);
}  // namespace cpu

void register_cpu_elementwise(CpuKernelTable& t) {
  cpu::register_cpu_unary(t);
  cpu::register_cpu_binary(t);
}

}  // namespace vrun
