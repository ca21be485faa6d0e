#!/usr/bin/env bash
# --offload through the CLI: run, inspect (text and JSON), compile -o (the library keeps the
# region and links oneDNN) with outputs equal to kiln's own, and the usage errors.
# Usage: check_offload.sh KILN PYTHON   (PYTHON: with numpy and onnx)
set -euo pipefail
kiln=$1
py=$2
work=$(mktemp -d /tmp/kiln-offload.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if ! "$kiln" run --help | grep -q -- "--offload"; then fail "no --offload option"; fi
# Conv -> Relu -> MaxPool -> Add(residual from a second conv) -> GlobalAveragePool, then Softmax.
"$py" - "$work/model.onnx" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
r = np.random.default_rng(0)
w1 = nh.from_array(r.standard_normal((8, 3, 3, 3)).astype(np.float32), "w1")
w2 = nh.from_array(r.standard_normal((8, 8, 1, 1)).astype(np.float32), "w2")
nodes = [h.make_node("Conv", ["x", "w1"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Relu", ["c"], ["r"]),
         h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         h.make_node("Conv", ["p", "w2"], ["d"]), h.make_node("Add", ["d", "p"], ["a"]),
         h.make_node("GlobalAveragePool", ["a"], ["g"]), h.make_node("Flatten", ["g"], ["f"]),
         h.make_node("Softmax", ["f"], ["y"], axis=-1)]
g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, 8])], [w1, w2])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
PY
if ! "$kiln" run "$work/model.onnx" --offload dnnl --output-dir "$work/dnnl" > "$work/run.txt" 2> "$work/err.txt"; then
  grep -q "no backend named 'dnnl'" "$work/err.txt" && { echo "skipped: kiln built without oneDNN"; exit 0; }
  cat "$work/err.txt"; fail "kiln run --offload dnnl"
fi
grep -q "offloaded in 1 region(s)" "$work/run.txt" || { cat "$work/run.txt"; fail "nothing offloaded"; }
"$kiln" run "$work/model.onnx" --output-dir "$work/own" > /dev/null
"$kiln" inspect "$work/model.onnx" --offload dnnl | grep -q "dnnl_0 (dnnl): 8 nodes" || fail "inspect --offload"
"$kiln" inspect "$work/model.onnx" --offload dnnl --json |
  "$py" -c "import json, sys; j = json.load(sys.stdin)['offload']; sys.exit(0 if j['regions'][0]['nodes'] == 8 else 1)" ||
  fail "inspect --offload --json"
"$kiln" compile "$work/model.onnx" --offload dnnl -o "$work/model.so" | grep -q "offloaded_nodes: 8 in 1 region(s)" ||
  fail "compile --offload -o"
"$kiln" run "$work/model.so" --threads 2 --output-dir "$work/lib" > /dev/null
"$py" -c "
import numpy as np, sys
own = np.load('$work/own/y.npy')
for d in ('dnnl', 'lib'):
    got = np.load('$work/%s/y.npy' % d)
    if not np.allclose(got, own, rtol=1e-4, atol=1e-6): sys.exit('FAIL: %s differs by %g' % (d, abs(got - own).max()))"
# Usage errors: exit 2 with a message, never a crash.
expect_usage() {
  local want=$1; shift
  if "$@" > /dev/null 2> "$work/err.txt"; then fail "no error from: $*"; fi

  grep -q "$want" "$work/err.txt" || { cat "$work/err.txt"; fail "expected '$want' from: $*"; }
}
expect_usage "available:" "$kiln" run "$work/model.onnx" --offload nope
expect_usage "needs the compiled engine" "$kiln" run "$work/model.onnx" --engine interp --offload dnnl
expect_usage "given twice" "$kiln" run "$work/model.onnx" --offload dnnl --offload dnnl
set +e
"$kiln" run "$work/model.onnx" --offload nope > /dev/null 2>&1
[ $? -eq 2 ] || fail "--offload nope should exit 2"
set -e
echo "offload cli: run, inspect, compile -o and errors ok"
