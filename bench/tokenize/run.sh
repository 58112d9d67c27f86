#!/usr/bin/env bash
# Tokenizer speed on one core against Hugging Face `tokenizers`, on ~10 MB of mixed text.
# Needs the venv of tests/reference/setup_tokenizer_venv.sh and a build of bench_tokenize:
#   cmake --build build --target bench_tokenize && bench/tokenize/run.sh [build]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${1:-build}
VENV=${VENV:-/tmp/vrun-tok-venv}
TEXT=${TEXT:-/tmp/vrun-bench-text.txt}
[ -f "$TEXT" ] || "$VENV/bin/python" "$HERE/make_bench_text.py" "$TEXT"
# taskset pins both to one core, so neither gains from a second one.
exec taskset -c 0 "$BUILD/bin/bench_tokenize" --tokenizer "$VENV/models/whisper-tokenizer.json" --text "$TEXT" \
  --python "$VENV/bin/python" --also "$VENV/models/smollm2.gguf" --runs 3
