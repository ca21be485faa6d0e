#!/usr/bin/env bash
# `kiln inspect --html`: the page for a small model loads in headless Chromium without JS errors
# and renders one SVG node per graph node (the page sets data-ready, data-node-count and
# data-rendered-nodes on <body>, or data-error when a script fails). Also checks --dot.
# Usage: check_html.sh KILN [WORKDIR]. Exit 77 (skip) when chromium or python3+onnx is missing.
set -euo pipefail
kiln=${1:?usage: check_html.sh KILN [WORKDIR]}
work=${2:-$(mktemp -d)}
mkdir -p "$work"
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z "$chrome" ]]; then
  echo "SKIP: chromium is not installed (apt-get install -y chromium)"
  exit 77
fi
py=""
for p in "${KILN_PYTHON:-}" /usr/bin/python3 python3; do
  if [[ -n "$p" ]] && "$p" -c 'import onnx, numpy' 2>/dev/null; then py=$p; break; fi
done
if [[ -z "$py" ]]; then
  echo "SKIP: a python3 with onnx and numpy is needed to write the test model"
  exit 77
fi

# A small model: a residual conv block (Conv+bias+Relu+Add fuse), a reduction with elementwise
# producers, an opaque MaxPool and a Transpose, with a symbolic batch dim.
"$py" - "$work/small.onnx" <<'EOF'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
inits = [
    numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w"),
    numpy_helper.from_array(rng.standard_normal((4,)).astype(np.float32), "b"),
    numpy_helper.from_array(np.array([2, 3], dtype=np.int64), "axes"),
]
nodes = [
    helper.make_node("Relu", ["x"], ["r"], name="relu_in"),
    helper.make_node("Conv", ["r", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    helper.make_node("Relu", ["c"], ["cr"], name="relu"),
    helper.make_node("Add", ["cr", "r"], ["res"], name="residual"),
    helper.make_node("MaxPool", ["res"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Mul", ["p", "p"], ["sq"], name="square"),
    helper.make_node("ReduceSum", ["sq", "axes"], ["s"], name="sum", keepdims=1),
    helper.make_node("Sqrt", ["s"], ["n"], name="norm"),
    helper.make_node("Transpose", ["n"], ["y"], name="transpose", perm=[0, 2, 3, 1]),
]
g = helper.make_graph(nodes, "small",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1, 1, 4])], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
EOF

"$kiln" inspect --html "$work/small.html" --json "$work/small.onnx" > "$work/small.json"
nodes=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["nodes_after"])' "$work/small.json")

"$chrome" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir="$work/profile" \
  --virtual-time-budget=5000 --dump-dom "file://$work/small.html" > "$work/dom.html" 2> "$work/chromium.log"
body=$(grep -o '<body[^>]*>' "$work/dom.html" | head -1 || true)
fail() { echo "FAIL: $*"; echo "body: $body"; tail -5 "$work/chromium.log"; exit 1; }
[[ -n "$body" ]] || fail "no <body> in the dumped DOM"
[[ "$body" != *data-error* ]] || fail "a script failed"
[[ "$body" == *'data-ready="1"'* ]] || fail "the page did not finish rendering"
[[ "$body" == *"data-node-count=\"$nodes\""* ]] || fail "the page has a different node count than inspect ($nodes)"
[[ "$body" == *"data-rendered-nodes=\"$nodes\""* ]] || fail "rendered nodes differ from the model's $nodes nodes"
groups=$(grep -o 'class="group"' "$work/dom.html" | wc -l)
[[ "$groups" -ge 2 ]] || fail "expected at least two fused groups outlined, found $groups"
grep -q 'http[s]*://[^"]*\.js' "$work/small.html" && fail "the page loads a script from the network"

"$kiln" inspect --dot "$work/small.onnx" > "$work/small.dot"
grep -q '^digraph' "$work/small.dot" || fail "--dot did not print a digraph"
grep -q 'subgraph cluster_' "$work/small.dot" || fail "--dot has no fused-group clusters"

echo "OK: $nodes nodes rendered, $groups fused groups outlined"
