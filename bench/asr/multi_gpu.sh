#!/usr/bin/env bash
# Several GPUs on one host: `vrun transcribe --devices` over a folder of files (an archive job),
# one worker per device, each with its own loaded model, pulling from one queue (longest first),
# against the same job on one device. Parakeet-TDT-0.6B shape with random weights in f16 (written
# once by parakeet_bench), synthetic audio from make_audio_folder.py (numpy).
#
#   bench/asr/multi_gpu.sh [--bin DIR | --bundle DIR] [--files 64] [--min-s 300] [--max-s 600]
#                          [--work DIR] [--runs "0 0,0 0,1"] [--model PATH]
#
# --bin: a folder with vrun and parakeet_bench (default build/bin); --bundle: a device bundle
# (its env.sh is sourced). --model: any model `vrun transcribe` takes instead of the random
# 0.6B-shape one (e.g. a small test model for a quick check on lavapipe). --runs: the --devices values to time, in order (default "0 0,0 0,1":
# one GPU, two workers on one GPU, two GPUs). Before the timed runs one short file is transcribed
# on every device so that each run finds the pipelines in the on-disk cache. Each run's wall time
# is the whole command (model loads included); "aggregate RTFx" is the folder's audio seconds over
# it, "vs first" its ratio to the first run's. The outputs of every run are compared with the
# first run's: they must be identical, byte for byte. PYTHON: a python3 with numpy (default python3).
set -euo pipefail
py="${PYTHON:-python3}"
here=$(cd "$(dirname "$0")" && pwd)
bin="" bundle="" files=64 min_s=300 max_s=600 work="${TMPDIR:-/tmp}/vrun-multi-gpu" runs="0 0,0 0,1" model=""
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --min-s) min_s=$2; shift 2 ;;
    --max-s) max_s=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    *) usage ;;
  esac
done
run_bin() {  # run_bin NAME ARGS...
  local name=$1; shift
  if [ -n "$bundle" ]; then (. "$bundle/env.sh"; "$bundle/bin/$name" "$@"); else "${bin:-$here/../../build/bin}/$name" "$@"; fi
}
mkdir -p "$work"
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null || true
run_bin vrun info 2>/dev/null | grep -iE 'vulkan|device' | head -n 8 || true

if [ -z "$model" ]; then
  model="$work/parakeet-0.6b-f16.vrp"
fi
if [ ! -f "$model" ]; then
  echo "== writing $model (random weights, parakeet-tdt-0.6b shape, f16)"
  run_bin parakeet_bench --random-0.6b --dtype f16 --vrp "$model" --seconds 10 --backend vulkan >/dev/null
fi
audio="$work/audio-$files-$min_s-$max_s"
[ -d "$audio" ] || "$py" "$here/make_audio_folder.py" "$audio" --files "$files" --min-s "$min_s" --max-s "$max_s"
total_s=$(python3 -c "
import os, sys, wave
t = 0.0
for r, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        with wave.open(os.path.join(r, f)) as w: t += w.getnframes() / w.getframerate()
print('%.1f' % t)" "$audio")
echo "folder: $audio, $files files, $total_s s of audio"

"$py" "$here/make_audio_folder.py" "$work/warm" --files 1 --min-s 30 --max-s 30 >/dev/null
for d in $(echo "$runs" | tr ' ,' '\n\n' | sort -u); do
  run_bin vrun transcribe -m "$model" --backend vulkan --devices "$d" -o txt --output-dir "$work/warm-out" \
    "$work/warm" >/dev/null 2>"$work/warm.err" || { cat "$work/warm.err"; exit 1; }
done

# What a run costs besides its files: the whole command on one 30-s file (process start, Vulkan,
# the model's load, the file, the exit), pipelines already cached.
for d in $(echo "$runs" | tr ' ' '\n' | sort -u); do
  t0=$(date +%s.%N)
  run_bin vrun transcribe -m "$model" --backend vulkan --devices "$d" -o txt --output-dir "$work/warm-out" \
    "$work/warm" >/dev/null 2>"$work/warm.err" || { cat "$work/warm.err"; exit 1; }
  t1=$(date +%s.%N)
  echo "--devices $d, one 30-s file, whole command: $(python3 -c "print('%.2f' % ($t1 - $t0))") s ($(grep -o 'loaded .* in [0-9.]* s' "$work/warm.err" | head -n 1 | grep -o '[0-9.]* s$') model load)"
done

printf '| --devices | workers | wall s | aggregate RTFx | vs first | outputs |\n| --- | --- | --- | --- | --- | --- |\n'
first_wall="" first_out=""
for d in $runs; do
  out="$work/out-${d//,/_}"
  rm -rf "$out" "$out.jsonl"
  t0=$(date +%s.%N)
  run_bin vrun transcribe -m "$model" --backend vulkan --devices "$d" -o txt --output-dir "$out" \
    --summary "$out.jsonl" "$audio" >/dev/null 2>"$out.err" || { cat "$out.err"; exit 1; }
  t1=$(date +%s.%N)
  wall=$(python3 -c "print('%.2f' % ($t1 - $t0))")
  ok=$(grep -c '"status":"ok"' "$out.jsonl" || true)
  [ "$ok" = "$files" ] || { echo "--devices $d: $ok of $files files ok (see $out.jsonl)"; exit 1; }
  same="(first)"
  if [ -n "$first_out" ]; then
    if diff -r "$first_out" "$out" >/dev/null; then same=identical; else same=DIFFERENT; fi
  else
    first_out=$out first_wall=$wall
  fi
  workers=$(echo "$d" | tr ',' '\n' | wc -l)
  python3 -c "
import sys
total, wall, first = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print('| %s | %s | %.2f | %.0f | %.2fx | %s |' % (sys.argv[4], sys.argv[5], wall, total / wall, first / wall, sys.argv[6]))" \
    "$total_s" "$wall" "$first_wall" "$d" "$workers" "$same"
  [ "$same" != DIFFERENT ] || { echo "outputs of --devices $d differ from the first run's" >&2; exit 1; }
done
