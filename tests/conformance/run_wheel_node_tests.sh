#!/usr/bin/env bash
# Generates the newest onnx wheel's node test cases and runs them against the expected-pass list.
# Usage: run_wheel_node_tests.sh KILN OUT_DIR [kiln test-onnx options, e.g. --engine compiled]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kiln=$1
out=$2
shift 2
py=${KILN_PYTHON:-$here/../../.venv/bin/python}
stamp="$out.version"
# The data depends on the generator's numpy and ml_dtypes too, so a new one of either regenerates it.
want=$("$py" -c "import ml_dtypes, numpy, onnx; print(onnx.__version__, numpy.__version__, ml_dtypes.__version__)")
if [ ! -d "$out" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$py" "$here/gen_wheel_node_tests.py" "$out" 2>/dev/null
  echo "$want" > "$stamp"
fi
exec "$kiln" test-onnx --expected "$here/expected_pass_wheel.txt" "$@" "$out"
