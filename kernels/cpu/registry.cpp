#include "kernels/cpu/cpu_kernel.h"

namespace vrun {

const CpuKernelTable& cpu_kernels() {
  static const CpuKernelTable table = [] {
    CpuKernelTable t;
    register_cpu_elementwise(t);
    register_cpu_reduce(t);
    register_cpu_norm(t);
    register_cpu_linalg(t);
    register_cpu_attention(t);
    register_cpu_decode_block(t);
    register_cpu_conv(t);
    register_cpu_data(t);
    register_cpu_rnn(t);
    return t;
  }();
  return table;
}

}  // namespace vrun
