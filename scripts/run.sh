#!/usr/bin/env bash
# The main job from a fresh checkout: installs dependencies, builds vrun, writes the demo program
# (a small two-layer transformer with a KV cache, the one the runtime tests build) and shows it
# with `vrun info`. Model runners (generate, transcribe) replace this step as they land.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target vrun make_demo_program
cache="${VRUN_CACHE:-$HOME/.cache/vrun}"
mkdir -p "$cache"
./build/bin/make_demo_program "$cache/demo-transformer.vrp"
./build/bin/vrun info -m "$cache/demo-transformer.vrp" "$@"
