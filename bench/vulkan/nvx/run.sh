#!/usr/bin/env bash
# Builds nvx_probe (README.md) into DIR, and runs it unless --build-only:
#   bash bench/vulkan/nvx/run.sh DIR [--build-only] [-- --reps N]
# Needs nvcc (CUDA 12.3 or later, for sm_90a), glslc, g++ and the Vulkan headers; running needs an
# NVIDIA GPU of compute capability 9.0 (H100 / H200) and its Vulkan driver.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:?usage: run.sh DIR [--build-only] [-- --reps N]}"
shift
build_only=0
if [[ "${1:-}" == "--build-only" ]]; then build_only=1; shift; fi
[[ "${1:-}" == "--" ]] && shift
mkdir -p "$out"
python3 "$here/gen_wgmma.py" "$out/wgmma.h"
nvcc -cubin -arch=sm_90a -O3 -I"$out" "$here/kernels.cu" -o "$out/kernels.cubin"
glslc --target-env=vulkan1.3 "$here/occupancy.comp" -o "$out/occupancy.spv"
g++ -O2 -std=c++17 -Wall -Wextra -Wno-missing-field-initializers "$here/probe.cpp" -o "$out/nvx_probe" -lvulkan
[[ $build_only == 1 ]] && { echo "built $out/nvx_probe, $out/kernels.cubin, $out/occupancy.spv"; exit 0; }
exec "$out/nvx_probe" "$out/kernels.cubin" "$out/occupancy.spv" "$@"
