#!/bin/sh
# `kiln run` with seeded random inputs on a model whose inputs have symbolic dims: the batch dim
# defaults to 1 (--batch B sets it), other dims by --dim NAME=VALUE (seq-like ones default to
# 128); a malformed --dim is a usage error (exit 2). Usage: check_run_dims.sh KILN VENV_PYTHON
# (exit 77 = skipped: no venv).
kiln=$1 python=$2
[ -x "$python" ] || { echo "skipped: no .venv (./kiln.sh setup)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" - "$tmp/dyn.onnx" <<'PY' || exit 1
import sys, onnx
from onnx import helper, TensorProto
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "seq", 4])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "seq", 4])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
expect() {  # expect ARGS... -- SUBSTRING: kiln run succeeds and prints SUBSTRING
  sub=$1; shift
  out=$("$kiln" run "$tmp/dyn.onnx" "$@" 2>&1) || { echo "kiln run $*: failed: $out"; exit 1; }
  echo "$out" | grep -qF -- "$sub" || { echo "kiln run $*: no '$sub' in: $out"; exit 1; }
}
expect "x: f32[1,128,4]"
expect "x: f32[3,128,4]" --batch 3
expect "y: f32[2,5,4]" --dim N=2 --dim seq=5
out=$("$kiln" run "$tmp/dyn.onnx" --dim seq 2>&1)
rc=$?
[ $rc -eq 2 ] || { echo "malformed --dim: want exit 2, got $rc: $out"; exit 1; }
echo "$out" | grep -q "expects name=value" || { echo "malformed --dim: no reason given: $out"; exit 1; }
echo "ok"
