#!/bin/sh
# `kiln quantize` from the command line: a run with a report, and bad input — an empty or
# mismatched calibration folder, no samples, an unknown method, a model without
# QuantizeLinear, a model with nothing to quantize — each a one-line message with the documented
# exit code (docs/errors.md), never a crash. Usage: check_quantize.sh KILN VENV_PYTHON
# (exit 77 = skipped: no venv).
kiln=$1 python=$2
[ -x "$python" ] || { echo "skipped: no .venv (./kiln.sh setup)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/empty" "$tmp/calib" "$tmp/wrong"
"$python" - "$tmp" <<'PY' || exit 1
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
d = sys.argv[1]
def save(name, nodes, inits, opset, shape=(1, 4)):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), f"{d}/{name}.onnx")
w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
save("mm", [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], [w], 13)
save("old", [helper.make_node("MatMul", ["x", "w"], ["y"])], [w], 9)
save("plain", [helper.make_node("Sigmoid", ["x"], ["y"])], [], 13)
for i in range(3):
    np.save(f"{d}/calib/{i}.npy", np.random.default_rng(i).standard_normal((1, 4)).astype(np.float32))
np.save(f"{d}/wrong/0.npy", np.zeros((2, 5), np.float32))
PY
fail() { echo "$*"; exit 1; }
# expect_error CODE SUBSTRING ARGS...: exit CODE, exactly one stderr line containing SUBSTRING
expect_error() {
  code=$1 sub=$2; shift 2
  "$kiln" quantize "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  [ $rc -eq "$code" ] || fail "kiln quantize $*: exit $rc, want $code: $(cat "$tmp/err")"
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "kiln quantize $*: want one stderr line: $(cat "$tmp/err")"
  grep -qF -- "$sub" "$tmp/err" || fail "kiln quantize $*: no '$sub' in: $(cat "$tmp/err")"
}
q=$tmp/q.onnx
"$kiln" quantize "$tmp/mm.onnx" -o "$q" --calibration "$tmp/calib" --report "$tmp/r.html" -q > "$tmp/out" 2>&1 ||
  fail "quantize: $(cat "$tmp/out")"
grep -q "quantized: 1 activations (u8), 1 weights" "$tmp/out" || fail "quantize output: $(cat "$tmp/out")"
grep -q "<td>Relu</td><td>1</td>" "$tmp/r.html" || fail "report: the float Relu is not listed"
grep -q "<h2>Quantized activations</h2>" "$tmp/r.html" || fail "no report"
# kiln bench --compare onnxruntime checks a quantized model by SQNR (JSON sqnr_db; 300 = identical).
out=$(KILN_PYTHON="$python" "$kiln" bench "$q" --compare onnxruntime --min-time 0.1 --min-runs 2 --rounds 1 --json) ||
  fail "bench of the quantized model: $out"
echo "$out" | "$python" -c '
import json, sys
r = json.load(sys.stdin)["results"][0]
assert r["outputs_match"] is True and r["sqnr_db"] is not None and r["sqnr_db"] >= 20, r
' || fail "bench of the quantized model: $out"
expect_error 4 "no .npy, .pb or image files" "$tmp/mm.onnx" -o "$q" --calibration "$tmp/empty"
expect_error 4 "x" "$tmp/mm.onnx" -o "$q" --calibration "$tmp/wrong"
expect_error 2 "calibration samples" "$tmp/mm.onnx" -o "$q"
expect_error 2 "not a folder" "$tmp/mm.onnx" -o "$q" --calibration "$tmp/nothere"
expect_error 2 "expected minmax, entropy or percentile" "$tmp/mm.onnx" -o "$q" --calibration "$tmp/calib" --method kl
expect_error 3 "predates QuantizeLinear" "$tmp/old.onnx" -o "$q" --calibration "$tmp/calib"
expect_error 3 "predates DynamicQuantizeLinear" "$tmp/old.onnx" -o "$q" --dynamic
"$kiln" quantize "$tmp/plain.onnx" -o "$q" --calibration "$tmp/calib" -q > "$tmp/out" 2>&1 || fail "plain: $(cat "$tmp/out")"
grep -q "nothing was quantized" "$tmp/out" || fail "plain model: no note: $(cat "$tmp/out")"
grep -q "left float: Sigmoid x1" "$tmp/out" || fail "plain model: float ops not listed: $(cat "$tmp/out")"
echo "ok"
