#!/usr/bin/env bash
# Exports ResNet-50 and the BERT-like encoder with Debian's PyTorch (once) and checks kiln's
# outputs against onnxruntime (rtol 1e-4, atol 1e-5). Exit 77 (skipped) without python3-torch.
# Usage: run_model_tests.sh KILN OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kiln=$1
out=$2
py=${KILN_PYTHON:-$here/../../.venv/bin/python}
if ! /usr/bin/python3 -c "import torch, torchvision" 2>/dev/null; then
  echo "skipped: Debian's python3-torch/python3-torchvision are not installed"
  exit 77
fi
mkdir -p "$out"
for m in resnet50 bert_like; do
  [ -f "$out/$m.onnx" ] || /usr/bin/python3 "$here/export_models.py" "$out" "$m" 2>/dev/null >/dev/null
done
status=0
for engine in interp compiled; do
  for m in resnet50 bert_like; do
    "$py" "$here/compare_ort.py" "$kiln" "$out/$m.onnx" --engine "$engine" || status=1
  done
done
exit $status
