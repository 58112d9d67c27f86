// The memory roofline every GPU "% of roofline" in the benchmarks is taken against: the device's
// attainable memory bandwidth, measured by a read kernel (kernels/vulkan/read_bw.comp) tuned over
// workgroup size, loads in flight per invocation, grid size and layout on a 1 GiB buffer (each
// configuration checked to read every word), beside the best copies the device does
// (vkCmdCopyBuffer, the same kernel copying, and PyTorch's device-to-device copy where PyTorch is
// importable: bench/gpu/torch_copy.py).
//
// Units: GB/s = 1e9 bytes a second moved between the memory and the chip. A copy moves each byte
// twice (read + written) and is counted so, which makes it comparable with the read kernel, whose
// bytes are all reads. The roof is the highest of the three figures: a copy that beats the read
// kernel shows that more bandwidth is there to be had, and `ok` says the read kernel came within
// 5% of the best copy.
#pragma once

#include <string>

#include "kernels/vulkan/context.h"

namespace vrun::vulkan::bench {

struct GaugeOptions {
  uint64_t bytes = 1ull << 30;  // buffer the read kernel and the copies run over (>= 1 GiB on a GPU)
  bool sweep = true;            // false: only the configuration that won on the H100 and H200
  bool verbose = false;         // print every configuration tried
  // PyTorch's device-to-device copy (GB/s, read + written): < 0 runs bench/gpu/torch_copy.py
  // (VRUN_TORCH_COPY_PY names another path; no figure when python3 or torch is missing), 0 skips it.
  double torch_copy_gbs = -1;
};

struct Gauge {
  double read_gbs = 0;          // the fastest read-kernel configuration
  std::string read_config;      // which one
  double vk_copy_gbs = 0;       // vkCmdCopyBuffer, read + written
  double kernel_copy_gbs = 0;   // read_bw.comp copying, read + written
  double torch_copy_gbs = 0;    // PyTorch's copy, read + written (0: not measured)
  std::string torch_device;     // the device PyTorch names
  double roof_gbs = 0;          // max of the above
  bool ok = false;              // read_gbs within 5% of the best copy
};

Gauge measure_gauge(Context& ctx, const GaugeOptions& opts);

// One line per figure, each saying its convention.
void print_gauge(const Gauge& g);

// PyTorch's copy figure from bench/gpu/torch_copy.py; 0 when it cannot run. `device` receives the
// name PyTorch gives the GPU.
double torch_copy_gbs(std::string* device);

}  // namespace vrun::vulkan::bench
