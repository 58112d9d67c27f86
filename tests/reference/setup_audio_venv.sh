#!/usr/bin/env bash
# Creates the Python environment that makes the audio feature goldens (tests/data/audio/) from the
# reference implementations: openai-whisper's log_mel_spectrogram and NeMo's
# AudioToMelSpectrogramPreprocessor. Only needed to regenerate goldens; the tests read the
# committed files and need no Python.
#   tests/reference/setup_audio_venv.sh [VENV_DIR]   (default /tmp/vrun-audio-venv)
set -euo pipefail
venv="${1:-/tmp/vrun-audio-venv}"
python3 -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
# torch first so that NeMo's resolver keeps the version it finds.
"$venv/bin/pip" install -q torch numpy soundfile
"$venv/bin/pip" install -q openai-whisper "nemo_toolkit[asr]"
"$venv/bin/python" -c 'import whisper, nemo; print("whisper ok, nemo", nemo.__version__)'
echo "venv ready: $venv"
