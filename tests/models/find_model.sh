#!/usr/bin/env bash
# Prints the path of an exported test model (tests/models/export_models.py): build/models/NAME.onnx
# when the model tests made it, else OUT_DIR/NAME.onnx, exported there on first use. Exits 77
# (ctest's "skipped") when neither exists and Debian's python3-torch is missing.
#   find_model.sh NAME OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
name=$1
out=$2
for model in "$here/../../build/models/$name.onnx" "$out/$name.onnx"; do
  [ -f "$model" ] && { echo "$model"; exit 0; }
done
/usr/bin/python3 -c "import torch, torchvision" 2>/dev/null || {
  echo "skipped: no build/models/$name.onnx and no python3-torch to export it" >&2
  exit 77
}
mkdir -p "$out"
/usr/bin/python3 "$here/export_models.py" "$out" "$name" >/dev/null 2>&1
echo "$out/$name.onnx"
