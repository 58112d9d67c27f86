#!/usr/bin/env bash
# Creates the Python environment that makes the Parakeet references (tests/data/parakeet/): NVIDIA
# NeMo's ASR collection (EncDecRNNTBPEModel with TDT, EncDecCTCModelBPE, the preprocessor and greedy
# decoders), sentencepiece to train the small tokenizer, and transformers for the Hugging Face
# ParakeetForTDT / ParakeetForCTC side. Only needed to regenerate the goldens; the tests read the
# committed files and need no Python.
#   tests/reference/setup_nemo_venv.sh [VENV_DIR]   (default /tmp/vrun-nemo-venv)
set -euo pipefail
venv="${1:-/tmp/vrun-nemo-venv}"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# torch first so that NeMo's resolver keeps the version it finds.
"$venv/bin/pip" install -q torch==2.15.0 numpy soundfile
"$venv/bin/pip" install -q "nemo_toolkit[asr]==3.0.0" sentencepiece "transformers==5.23.0" safetensors
"$venv/bin/python" - <<'PY'
import nemo, transformers, torch
from nemo.collections.asr.models import EncDecRNNTBPEModel, EncDecCTCModelBPE  # noqa: F401
print("nemo", nemo.__version__, "transformers", transformers.__version__, "torch", torch.__version__)
PY
echo "venv ready: $venv"
