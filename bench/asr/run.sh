#!/usr/bin/env bash
# Speech-recognition benchmarks: runs every bench/asr/*_run.sh with the same arguments.
#   bench/asr/run.sh [--gpu] [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
for script in "$here"/*_run.sh; do
  bash "$script" "$@"
done
