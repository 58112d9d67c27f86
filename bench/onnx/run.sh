#!/usr/bin/env bash
# vrun (Vulkan) against PyTorch eager on one GPU, same machine, same run: MobileNetV3-small at
# batch 1 and 32 (224x224) and the YOLO-style detector at 640x640, all f32, random weights.
#
#   /usr/bin/python3 bench/onnx/make_models.py DIR        # once, where torch + torchvision are
#   bench/onnx/run.sh DIR [--bin build/bin | --bundle DIR] [--repeat 50]
#
# vrun: `vrun run --backend vulkan --repeat N`, twice per case: the first process of the machine
# (pipelines compiled and written to the on-disk cache) and a second one (read from it). Each
# prints its load, first call, and the median of N calls, each call host to host (input uploaded,
# outputs read back). PyTorch: bench/onnx/torch_cnn.py (host to host and on device, fp32 and fp16).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir="" bin="" bundle="" repeat=50
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --bundle) bundle=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    -*) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
    *) dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2; }
dir=$(realpath "$dir")
vrun() {
  if [ -n "$bundle" ]; then (. "$bundle/env.sh"; "$bundle/bin/vrun" "$@"); else "${bin:-$here/../../build/bin}/vrun" "$@"; fi
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
python3 "$here/torch_cnn.py" "$dir" --repeat "$repeat" | tee "$dir/torch.jsonl"
for pass in first-process second-process; do
  for c in "mobilenet_v3_small image img224_b1.npy 1" "mobilenet_v3_small image img224_b32.npy 32" "yolo_640 images img640_b1.npy 1"; do
    set -- $c
    echo "== vrun $1 batch $4 ($pass)"
    vrun run -m "$dir/$1.onnx" --input "$2=$dir/$3" --dim "batch=$4" --backend vulkan --repeat "$repeat" \
      -o "$dir/out-$1-b$4" 2>&1 | grep -E "^(time|backend):"
  done
done
