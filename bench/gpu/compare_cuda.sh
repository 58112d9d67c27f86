#!/usr/bin/env bash
# vrun (Vulkan) against llama.cpp's CUDA backend on one NVIDIA GPU, in one command: builds
# llama.cpp's llama-bench for CUDA from llama-cpp-python's source distribution (its vendored
# llama.cpp), makes Llama-3.2-1B-shaped random-weight GGUFs (f16 and q4_0) with
# bench/llm/make_random_gguf.py, measures the memory roofline (vrun_bench_vulkan --gauge, with
# PyTorch's copy beside it) and runs both (bench/gpu/compare_cuda.py), printing the ratios and
# decode's fraction of the roofline. Needs no network: the source distribution is passed in.
#
#   pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36     # where there is a network
#   bench/gpu/compare_cuda.sh --sdist llama_cpp_python-0.3.36.tar.gz --tokenizer SmolLM2.gguf \
#       [--bin build/bin | --bundle DIR] [--work /tmp/vrun-cuda-peer] [--runs 3] [--repeat 1] [--roofline-bench] [--speech]
#       [--serve [--wheels DIR]]
#
# --sdist: the .tar.gz or its unpacked folder (a copy without the parts the build does not use,
#   models/, docs/, tests/, other backends, builds the same). --tokenizer: a GGUF whose tokenizer
#   the random models take (SmolLM2-135M-Instruct's, bench/llm/run.sh fetches it; its 49,152-token
#   vocabulary makes the output head smaller than Llama 3's). --bin: vrun and vrun_bench_vulkan
#   (bench_llama_roofline too for --roofline-bench, which adds its rows). --bundle: the programs
#   packed with their shared libraries (bin/, lib/ and env.sh, as a machine without the project's
#   libraries needs them): they run through env.sh, which the CUDA build and Python do not see.
#   --speech adds the speech encoders once: whisper_bench --random-turbo (vrun, Vulkan) beside
#   bench/gpu/whisper_torch_encoder.py, then 8 windows batched (--batch 8) beside
#   bench/gpu/whisper_torch_generate.py (transformers, batch 8), parakeet_bench --random-0.6b beside
#   bench/asr/parakeet_torch.py --no-generate (transformers on the machine's PyTorch); their rows
#   are printed as the programs print them. --serve adds serving: llama.cpp's llama-server (CUDA)
#   is built too, and bench/serve/serve_bench.py runs `vrun serve --backend vulkan` beside it on the
#   q4_0 GGUF (1, 8, 32 and 64 streams of 128 tokens, --parallel 32, two rounds a level); it needs
#   the openai client in python3 (--wheels DIR installs it from wheels there, with no network).
#   --repeat N: the whole
#   comparison N times (the build and the files once). What is built or made stays in --work and
#   is reused by a later call. CMAKE_CUDA_ARCHITECTURES comes from CUDA_ARCH (default: the GPU's,
#   from nvidia-smi).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
sdist="" tok="" bin="build/bin" bundle="" speech=0 work="/tmp/vrun-cuda-peer" runs=3 repeat=1 roofline_bench=0 serve=0 wheels=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sdist) sdist=$2; shift 2 ;;
    --tokenizer) tok=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --roofline-bench) roofline_bench=1; shift ;;
    --speech) speech=1; shift ;;
    --serve) serve=1; shift ;;
    --wheels) wheels=$2; shift 2 ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
  esac
done
[ -n "$sdist" ] && [ -n "$tok" ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
sdist=$(realpath "$sdist") tok=$(realpath "$tok")
if [ "$serve" = 1 ] && ! python3 -c "import openai" 2>/dev/null; then
  # python3's own pip (a bare `pip` may belong to another Python); Debian's marks its Python as
  # externally managed.
  [ -n "$wheels" ] && { python3 -m pip install -q --no-index --find-links "$wheels" openai ||
    python3 -m pip install -q --break-system-packages --no-index --find-links "$wheels" openai; }
  python3 -c "import openai" || { echo "--serve needs the openai client in python3 (--wheels DIR)" >&2; exit 1; }
fi
mkdir -p "$work"
if [ -n "$bundle" ]; then
  bundle=$(realpath "$bundle") bin=$work/bin
  mkdir -p "$bin"
  for b in "$bundle"/bin/*; do
    printf '#!/usr/bin/env bash\n. "%s/env.sh"\nexec "%s" "$@"\n' "$bundle" "$b" > "$bin/$(basename "$b")"
    chmod +x "$bin/$(basename "$b")"
  done
fi
bin=$(realpath "$bin")
# vrun's programs checked before the peer's build (minutes) starts.
need=(vrun vrun_bench_vulkan)
[ "$roofline_bench" = 1 ] && need+=(bench_llama_roofline)
for p in "${need[@]}"; do
  [ -x "$bin/$p" ] || { echo "compare_cuda.sh: $bin/$p is missing (--bin or --bundle must hold ${need[*]})" >&2; exit 1; }
done
t0=$(date +%s)
stamp() { echo "[$(($(date +%s) - t0)) s] $*"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader || true

# The source.
if [ -d "$sdist" ]; then src=$sdist; else
  [ -d "$work/src" ] || { mkdir -p "$work/src"; tar xzf "$sdist" -C "$work/src"; }
  src=$work/src
fi
src=$(dirname "$(find "$src" -path '*vendor/llama.cpp/CMakeLists.txt' -print -quit)")
[ -f "$src/CMakeLists.txt" ] || { echo "no vendor/llama.cpp in $sdist" >&2; exit 1; }
stamp "llama.cpp source: $src"

# The models, made while the peer builds (numpy is single-threaded: one process each).
export PYTHONPATH="$src/gguf-py${PYTHONPATH:+:$PYTHONPATH}"
pids=()
for t in f16 q4_0; do
  m="$work/llama-1b-random-$t.gguf"
  [ -f "$m" ] || { python3 bench/llm/make_random_gguf.py --shape llama-1b --type "$t" --tokenizer-from "$tok" \
    -o "$m.part" > "$work/gguf-$t.log" 2>&1 && mv "$m.part" "$m" & pids+=($!); }
done

# The peer: llama-bench alone, CUDA, for this GPU's architecture.
lb="$work/build/bin/llama-bench" ls="$work/build/bin/llama-server"
if [ ! -x "$lb" ] || { [ "$serve" = 1 ] && [ ! -x "$ls" ]; }; then
  arch=${CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')}
  arch=${arch:-90}
  stamp "building llama-bench (CUDA, sm_$arch) ..."
  cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=$([ "$serve" = 1 ] && echo ON || echo OFF) > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
  targets=(llama-bench)
  [ "$serve" = 1 ] && targets+=(llama-server)
  cmake --build "$work/build" --target "${targets[@]}" -j"$(nproc)" >> "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
fi
stamp "llama-bench: $lb"
for p in "${pids[@]}"; do wait "$p" || { cat "$work"/gguf-*.log; exit 1; }; done
stamp "models: $(ls "$work"/*.gguf | tr '\n' ' ')"

# A 512-token prompt for the SmolLM2 tokenizer (the first 440 words of Genesis; the count is printed).
tr '\n' ' ' < tests/data/llama/kjv_genesis_1-12.txt | cut -d' ' -f1-440 > "$work/prompt.txt"

for i in $(seq 1 "$repeat"); do
  stamp "comparison $i of $repeat"
  python3 bench/gpu/compare_cuda.py --bin "$bin" --llama-bench "$lb" --prompt-file "$work/prompt.txt" --runs "$runs" \
    "$work/llama-1b-random-f16.gguf" "$work/llama-1b-random-q4_0.gguf"
done
# bench_llama_roofline once (its own random model, Llama 3's 128,256-token vocabulary).
if [ "$roofline_bench" = 1 ] && [ -x "$bin/bench_llama_roofline" ]; then
  tc=$(python3 bench/gpu/torch_copy.py | awk '{print $2}') || tc=0
  for t in f16 q4_0; do
    "$bin/bench_llama_roofline" --shape llama-1b --dtype $t --backend vulkan --decode 128 --torch-copy "${tc:-0}" 2>&1 | grep -v "^built"
  done
fi
if [ "$speech" = 1 ]; then
  stamp "speech encoders (vrun on Vulkan, then transformers on PyTorch)"
  [ -x "$bin/whisper_bench" ] && { "$bin/whisper_bench" --random-turbo --backend vulkan --windows 8 --tokens 100 2>&1 | tail -n 3 || true; }
  python3 bench/gpu/whisper_torch_encoder.py --windows 8 2>&1 | tail -n 2 || true
  # Batched: 8 windows together (encode_streams and step_streams_8) beside transformers at batch 8.
  [ -x "$bin/whisper_bench" ] && { "$bin/whisper_bench" --random-turbo --backend vulkan --windows 8 --batch 8 --tokens 100 2>&1 | tail -n 1 || true; }
  python3 bench/gpu/whisper_torch_generate.py --batch 8 --tokens 100 2>&1 | tail -n 1 || true
  [ -x "$bin/parakeet_bench" ] && { "$bin/parakeet_bench" --random-0.6b --backend vulkan --dtype f16 --seconds 600 2>&1 | tail -n 3 || true; }
  python3 bench/asr/parakeet_torch.py --device cuda --dtypes bf16 --seconds 600 --no-generate 2>&1 | tail -n 3 || true
fi
if [ "$serve" = 1 ]; then
  stamp "serving: vrun serve (Vulkan) beside llama-server (CUDA)"
  python3 bench/serve/serve_bench.py --vrun "$bin/vrun" --backend vulkan --llama-server "$ls" --llama-args "-ngl 99" \
    --model "$work/llama-1b-random-q4_0.gguf" --streams 1,8,32,64 --tokens 128 --parallel 32 --rounds 2
fi
stamp done
