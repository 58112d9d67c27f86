# Sourced by bench/asr/*_run.sh, which take [--gpu] [BUILD_DIR]:
#   . "$(dirname "$0")/common.sh" BENCH_TARGET WORK_NAME "$@"
# leaves the shell in the repository root with gpu (0/1), build (BUILD_DIR, default build),
# seconds ($VRUN_BENCH_SECONDS, default 600), work (a scratch folder $TMPDIR/WORK_NAME) and
# bench (BUILD_DIR/bin/BENCH_TARGET, built first when it is missing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
bench_target=$1
work_name=$2
shift 2
gpu=0
if [ "${1:-}" = "--gpu" ]; then gpu=1; shift; fi
build="${1:-build}"
seconds="${VRUN_BENCH_SECONDS:-600}"
work="${TMPDIR:-/tmp}/$work_name"
mkdir -p "$work"
bench="$build/bin/$bench_target"
[ -x "$bench" ] || cmake --build "$build" --target "$bench_target" -j"$(nproc)"
