#!/usr/bin/env bash
# Before/after on this machine in one run: two vrun binaries, the same CPU work, interleaved
# (A B A B ...) so that a busy machine slows both alike. Prints the median of each figure.
#
#   bench/ab/run.sh OLD_VRUN NEW_VRUN [ROUNDS]
#
# Work: SmolLM2-135M-Instruct Q4_1 (prefill and decode tok/s, greedy, 64 tokens after a
# 200-token prompt) and Whisper tiny.en on a LibriVox clip (RTFx), both with --backend cpu,
# on every core (-t 0) and on one (-t 1, where user time is least disturbed by other work).
# Models come from scripts/fetch-models.sh; audio from Debian's pocketsphinx-testdata.
set -euo pipefail
old=${1:?old vrun binary}
new=${2:?new vrun binary}
rounds=${3:-3}
cache="${VRUN_CACHE:-$HOME/.cache/vrun}/models"
llm="$cache/SmolLM2-135M-Instruct.Q4_1.gguf"
asr="$cache/whisper-tiny.en"
clip=$(ls /usr/share/pocketsphinx/test/data/librivox/*.wav 2>/dev/null | head -1 || true)
[ -f "$llm" ] && [ -d "$asr" ] || { echo "bench/ab: run scripts/fetch-models.sh smollm2 whisper-tiny first" >&2; exit 2; }
[ -n "$clip" ] || { echo "bench/ab: no LibriVox clip (apt-get install pocketsphinx-testdata)" >&2; exit 2; }
prompt=$(python3 -c "print(' '.join(['The quick brown fox jumps over the lazy dog.'] * 20))")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

one() {  # label binary threads
  local label=$1 bin=$2 t=$3
  "$bin" generate -m "$llm" --raw -p "$prompt" -n 64 --temp 0 --ignore-eos --backend cpu -t "$t" --json 2>/dev/null |
    python3 -c "import json,sys; s=json.load(sys.stdin)['stats']; print('$label t$t prefill_tok_s', s['prefill_tokens_per_s']); print('$label t$t decode_tok_s', s['decode_tokens_per_s'])" >>"$tmp/rows"
  "$bin" transcribe -m "$asr" --backend cpu -t "$t" "$clip" 2>"$tmp/err" >/dev/null
  sed -n 's/.*RTFx \([0-9.]*\).*/'"$label t$t whisper_rtfx"' \1/p' "$tmp/err" | tail -1 >>"$tmp/rows"
}

for r in $(seq "$rounds"); do
  for t in 0 1; do
    one old "$old" "$t"
    one new "$new" "$t"
  done
done
python3 - "$tmp/rows" <<'PY'
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, t, key, value = line.split()
    rows[(t, key, label)].append(float(value))
keys = sorted({(t, k) for t, k, _ in rows})
print(f"{'threads':8} {'figure':16} {'old (median)':>14} {'new (median)':>14} {'new/old':>8}  runs")
for t, k in keys:
    o, n = rows[(t, k, 'old')], rows[(t, k, 'new')]
    mo, mn = statistics.median(o), statistics.median(n)
    print(f"{t:8} {k:16} {mo:14.1f} {mn:14.1f} {mn / mo:8.3f}  old {', '.join(f'{v:.1f}' for v in o)}; new {', '.join(f'{v:.1f}' for v in n)}")
PY
