#!/usr/bin/env bash
# ctest wrapper: the OCR demo must decode text and agree with onnxruntime.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${KILN_PYTHON:-$here/../.venv/bin/python}
exec "$py" "$here/ocr_demo.py" --kiln "$1" --repeat 1
