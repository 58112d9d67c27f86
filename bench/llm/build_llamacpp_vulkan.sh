#!/usr/bin/env bash
# Builds llama.cpp's own llama-bench, test-backend-ops and llama-server with its Vulkan backend,
# cooperative-matrix kernels included, as the peer for bench/llm/bench_llm_gpu.py, for
# `vrun_bench_vulkan --peer-shapes` and for bench/serve/serve_bench.py on a GPU machine.
#   bench/llm/build_llamacpp_vulkan.sh [OUT_DIR]      (default /tmp/llamacpp-vulkan)
# The source is llama-cpp-python's sdist from PyPI (its vendored llama.cpp). Debian 12's glslc and
# Vulkan headers predate the cooperative-matrix extensions, so the build compiles its shaders
# through bench/llm/peer/glslc_slang.py (slang's glslang, which scripts/setup.sh installs) and
# force-includes bench/llm/peer/vk_hpp_compat.hpp. About 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
out="${1:-/tmp/llamacpp-vulkan}"
version=0.3.16
mkdir -p "$out"
src="$out/llama_cpp_python-$version/vendor/llama.cpp"
if [ ! -d "$src" ]; then
  python3 -m pip download --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$out"
  tar xzf "$out/llama_cpp_python-$version.tar.gz" -C "$out"
fi
cmake -S "$src" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DVulkan_GLSLC_EXECUTABLE="$root/bench/llm/peer/glslc_slang.py" \
  -DCMAKE_CXX_FLAGS="-I$root -include $root/bench/llm/peer/vk_hpp_compat.hpp"
cmake --build "$out/build" --target llama-bench test-backend-ops llama-server -j"$(nproc)"
echo "$out/build/bin/llama-bench"
echo "$out/build/bin/test-backend-ops"
echo "$out/build/bin/llama-server"
