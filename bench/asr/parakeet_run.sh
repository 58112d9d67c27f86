#!/usr/bin/env bash
# Parakeet RTFx at parakeet-tdt-0.6b-v2's shape on 10 minutes of audio (random weights made by each
# program, same recipe; synthetic audio by default): vrun's parakeet_bench and, in the same run,
# transformers' ParakeetForTDT (bench/asr/parakeet_torch.py) and, on the CPU, NVIDIA NeMo's own
# transcribe() (bench/asr/parakeet_nemo.py), then vrun RTFx / peer RTFx.
#   bench/asr/parakeet_run.sh [BUILD_DIR]        this CPU: vrun at 2 threads, transformers (f32) at 2,
#                                                NeMo (f32, full attention, greedy_batch) at 2
#   bench/asr/parakeet_run.sh --gpu [BUILD_DIR]  vrun on Vulkan, single stream and --batch 4 (f32
#                                                weights as the released checkpoint, and f16);
#                                                transformers on CUDA in f32 and bf16, batch 1 and 4
# BUILD_DIR holds bin/parakeet_bench (a build folder, or .devbundle on the GPU machine).
# Environment: VRUN_BENCH_SECONDS (600), VRUN_PARAKEET_AUDIO (a 16-bit 16-kHz mono wav for both,
# else synthetic tones), VRUN_PARAKEET_PYTHON (python with torch + transformers: default
# /tmp/vrun-llm-venv/bin/python when it exists, else python3), VRUN_PARAKEET_BATCH (4),
# VRUN_NEMO_PYTHON (python with nemo_toolkit[asr], as tests/reference/setup_nemo_venv.sh makes it:
# default /tmp/vrun-nemo-venv/bin/python when it exists, else python3), VRUN_PARAKEET_PEERS (the
# peers to run, of "transformers nemo": default both), VRUN_NEMO_ARGS (more parakeet_nemo.py
# arguments, e.g. "--no-encoder"), VRUN_PARAKEET_ATTENTION (full, or local: vrun's and NeMo's
# limited-context attention, [128, 128], over the whole file; transformers has none and is skipped).
# Each peer is skipped with a note when its Python lacks torch, ParakeetForTDT or NeMo.
. "$(dirname "$0")/common.sh" parakeet_bench vrun-parakeet-bench "$@"
batch="${VRUN_PARAKEET_BATCH:-4}"
py="${VRUN_PARAKEET_PYTHON:-}"
if [ -z "$py" ]; then
  if [ -x /tmp/vrun-llm-venv/bin/python ]; then py=/tmp/vrun-llm-venv/bin/python; else py=python3; fi
fi
nemo_py="${VRUN_NEMO_PYTHON:-}"
if [ -z "$nemo_py" ]; then
  if [ -x /tmp/vrun-nemo-venv/bin/python ]; then nemo_py=/tmp/vrun-nemo-venv/bin/python; else nemo_py=python3; fi
fi
audio=()
[ -n "${VRUN_PARAKEET_AUDIO:-}" ] && audio=(--audio "$VRUN_PARAKEET_AUDIO")
echo "audio: ${VRUN_PARAKEET_AUDIO:-synthetic tones} (${seconds} s)"

rtfx() { awk -F'|' '{gsub(/ /, "", $6); gsub(/ /, "", $7); print $6 / $7}'; }  # audio s / wall s, unrounded
ours_rows=()
vrun() {  # vrun() ARGS...: one parakeet_bench row (the header once)
  local out
  local extra=()
  [ "$attention" = local ] && extra=(--attention local)
  out=$("$bench" --random-0.6b --seconds "$seconds" "${audio[@]}" "${extra[@]}" "$@")
  if [ ${#ours_rows[@]} -eq 0 ]; then echo "$out"; else echo "$out" | tail -n 1; fi
  ours_rows+=("$(echo "$out" | tail -n 1)")
}
peer_rows=()
# run_peer NAME PYTHON SCRIPT NOTES ARGS...: a peer's rows (added to peer_rows), the stderr lines
# matching NOTES (an extended regex, empty for none), or a note when it cannot run here (status 2).
run_peer() {
  local name=$1 python=$2 script=$3 notes=$4 out rc=0
  shift 4
  out=$("$python" "bench/asr/$script" --seconds "$seconds" "${audio[@]}" "$@" 2>"$work/$script.err") || rc=$?
  if [ "$rc" = 2 ]; then
    echo "$name peer skipped: $(tail -n 1 "$work/$script.err")"
    return 0
  fi
  [ "$rc" = 0 ] || { cat "$work/$script.err" >&2; echo "$script failed (status $rc)" >&2; exit 1; }
  echo "$out" | tail -n +3
  if [ -n "$notes" ]; then grep -E "$notes" "$work/$script.err" | sed "s/^/  ${name,,}: /" || true; fi
  while IFS= read -r line; do peer_rows+=("$line"); done < <(echo "$out" | tail -n +3)
}
peers=" ${VRUN_PARAKEET_PEERS:-transformers nemo} "
read -r -a nemo_args <<< "${VRUN_NEMO_ARGS:-}"
attention="${VRUN_PARAKEET_ATTENTION:-full}"
case "$attention" in
  full) ;;
  local)
    peers="${peers/ transformers / }"
    nemo_args+=(--attention local)
    echo "attention: local [128, 128] (transformers has no local attention: not run)" ;;
  *) echo "VRUN_PARAKEET_ATTENTION=$attention (full or local)" >&2; exit 2 ;;
esac
peer() { [[ "$peers" == *" transformers "* ]] || return 0; run_peer transformers "$py" parakeet_torch.py "" "$@"; }
nemo() {
  [[ "$peers" == *" nemo "* ]] || return 0
  run_peer NeMo "$nemo_py" parakeet_nemo.py '^(random parakeet|encoder:|transcribe:)' "$@" "${nemo_args[@]}"
}
if [ "$gpu" = 1 ]; then
  for dtype in f32 f16; do
    # Each run builds its program in memory (no 2.5-GB .vrp on disk).
    vrun --backend vulkan --dtype "$dtype"
    vrun --backend vulkan --dtype "$dtype" --batch "$batch"
  done
  peer --device cuda --dtypes f32,bf16
  peer --device cuda --dtypes f32,bf16 --batch "$batch" --no-generate
else
  vrun --backend cpu --threads 2
  peer --device cpu --threads 2 --dtypes f32
  nemo --threads 2
fi

# vrun's rows against the peers' rows of the same batch (transformers' generate and NeMo's
# transcribe: the whole transcription; encoder: the encoder alone, a lower bound on its transcription time).
for o in "${ours_rows[@]}"; do
  ob=$(echo "$o" | awk -F'|' '{gsub(/ /, "", $5); print $5}')
  for p in "${peer_rows[@]}"; do
    pb=$(echo "$p" | awk -F'|' '{gsub(/ /, "", $5); print $5}')
    [ "$ob" = "$pb" ] || continue
    on=$(echo "$o" | awk -F'|' '{sub(/^ +/, "", $2); sub(/ +$/, "", $2); print $2}')
    pn=$(echo "$p" | awk -F'|' '{sub(/^ +/, "", $2); sub(/ +$/, "", $2); print $2}')
    echo "batch $ob: $on RTFx / $pn RTFx = $(awk -v a="$(echo "$o" | rtfx)" -v b="$(echo "$p" | rtfx)" 'BEGIN {printf "%.2f", a / b}')"
  done
done
