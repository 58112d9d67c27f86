#!/usr/bin/env bash
# Whisper RTFx on a 10-minute file (real speech from pocketsphinx-testdata and tests/data, joined
# with 0.5-s gaps and repeated to 600 s), greedy, temperature 0 only, no VAD.
#   bench/asr/whisper_run.sh [BUILD_DIR]        this CPU: vrun and faster-whisper (same tiny.en
#                                               weights, same threads: 1 and 2), and the WER of
#                                               vrun's text against faster-whisper's
#   bench/asr/whisper_run.sh --gpu [BUILD_DIR]  vrun on Vulkan: tiny.en, and a random-weight
#                                               large-v3-turbo-shaped model (no Python needed)
# tiny.en comes from tests/reference/fetch_whisper_tiny_en.sh (or $VRUN_WHISPER_MODEL); the
# faster-whisper venv from $VRUN_WHISPER_VENV (default /tmp/whisper-venv, made with
# `python3 -m venv /tmp/whisper-venv && /tmp/whisper-venv/bin/pip install faster-whisper`).
. "$(dirname "$0")/common.sh" whisper_bench vrun-asr-bench "$@"
model="${VRUN_WHISPER_MODEL:-$(sh tests/reference/fetch_whisper_tiny_en.sh)}"
venv="${VRUN_WHISPER_VENV:-/tmp/whisper-venv}"

# The speech: every clip at 16 kHz mono, 0.5 s of silence after each, repeated to $seconds.
# Without sox (a bare GPU machine), whisper_bench tiles one committed clip to $seconds itself.
audio="$work/speech_${seconds}s.wav"
tile=()
if ! command -v sox >/dev/null; then
  audio=tests/data/audio/speech_0930.wav
  tile=(--seconds "$seconds")
elif [ ! -f "$audio" ]; then
  ps=/usr/share/pocketsphinx/test/data
  parts=()
  i=0
  for f in "$ps"/librivox/*.wav "$ps"/cards/*.wav tests/data/whisper/espeak_*.wav tests/data/audio/speech_*.wav; do
    [ -f "$f" ] || continue
    sox "$f" -r 16000 -c 1 -b 16 "$work/part$i.wav" pad 0 0.5
    parts+=("$work/part$i.wav"); i=$((i + 1))
  done
  for r in goforward numbers something; do
    [ -f "$ps/$r.raw" ] || continue
    sox -t raw -r 16000 -e signed -b 16 -c 1 "$ps/$r.raw" "$work/part$i.wav" pad 0 0.5
    parts+=("$work/part$i.wav"); i=$((i + 1))
  done
  [ "$i" -gt 0 ] || { echo "no speech clips found (install pocketsphinx-testdata)" >&2; exit 1; }
  sox "${parts[@]}" "$work/once.wav"
  once=$(soxi -D "$work/once.wav")
  repeats=$(python3 -c "import math; print(math.ceil($seconds / $once))" 2>/dev/null || echo 20)
  sox "$work/once.wav" "$audio" repeat "$((repeats - 1))" trim 0 "$seconds"
  rm -f "$work"/part*.wav "$work/once.wav"
fi
echo "audio: $audio ${tile[*]:-}"

if [ "$gpu" = 1 ]; then
  "$bench" --model "$model" --audio "$audio" "${tile[@]}" --backend vulkan --text-out "$work/vrun_gpu.txt"
  "$bench" --random-turbo --backend vulkan --windows 8 --tokens 100 | tail -n 1
  exit 0
fi

wall() { awk -F'|' '{gsub(/ /, "", $6); print $6}'; }
ratios=()
for t in 1 2; do
  ours=$("$bench" --model "$model" --audio "$audio" --threads "$t" --backend cpu --text-out "$work/vrun_t$t.txt")
  if [ "$t" = 1 ]; then echo "$ours"; else echo "$ours" | tail -n 1; fi
  ref=$("$venv/bin/python" bench/asr/whisper_reference.py --model "$model" --audio "$audio" --threads "$t" --text-out "$work/fw_t$t.txt" 2>/dev/null)
  echo "$ref"
  ratios+=("$t thread(s): vrun RTFx / faster-whisper RTFx = $(python3 -c "print('%.2f' % ($(echo "$ref" | wall) / $(echo "$ours" | tail -n 1 | wall)))")")
done
printf '%s\n' "${ratios[@]}"
read -r wer nref nhyp < <(python3 bench/asr/whisper_wer.py "$work/fw_t1.txt" "$work/vrun_t1.txt")
echo "WER of vrun's text against faster-whisper's (1 thread): $wer ($nref reference words, $nhyp ours)"
read -r same _ _ < <(python3 bench/asr/whisper_wer.py "$work/fw_t1.txt" "$work/fw_t2.txt")
echo "faster-whisper 1 vs 2 threads: WER $same"
