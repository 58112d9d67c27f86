#!/usr/bin/env bash
# Vulkan kernel benchmark with the tensor-core roofline taken from the device's own PyTorch
# matmul in the same run (when python3 has a CUDA PyTorch; otherwise the roof is the fastest
# vrun linear kernel).
#   bash bench/vulkan/run.sh [BUILD_DIR] [-- extra vrun_bench_vulkan args]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
shift || true
[[ "${1:-}" == "--" ]] && shift
bin="$build/bin/vrun_bench_vulkan"
[[ -x "$bin" ]] || { echo "missing $bin: cmake --build $build --target vrun_bench_vulkan" >&2; exit 1; }
args=()
if roof="$(python3 "$here/torch_matmul_rate.py" 2>/dev/null)"; then
  echo "PyTorch f16 matmul 8192^3: $roof TFLOP/s"
  args+=(--tensor-roof "$roof")
else
  echo "PyTorch with CUDA not available: the compute roof is vrun's own fastest linear kernel"
fi
exec "$bin" "${args[@]}" "$@"
