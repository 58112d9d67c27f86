// Attention benchmarks of vrun_bench_vulkan: decode attention as a step runs it
// (--attention-shapes), the workgroup-scope prefill tiles (--sdpa-tiles) and the decode row
// kernel's key splits (--sdpa-rows). Rows go to stdout as bench_kernels.cpp prints them.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/vulkan/context.h"

namespace vrun::vulkan::bench {

void bench_attention_shapes(Context& ctx, int reps, double bw);
void bench_sdpa_tiles(Context& ctx, int reps, int64_t S, double tensor_roof, const std::string& sdpa_tiles);
void bench_sdpa_rows(Context& ctx, int reps, double bw, int64_t S, const std::string& sdpa_rows);

}  // namespace vrun::vulkan::bench
