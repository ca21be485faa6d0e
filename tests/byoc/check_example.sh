#!/usr/bin/env bash
# The out-of-tree backend example end to end: install kiln from the build dir into a fresh prefix,
# build examples/byoc against it with find_package(kiln), and run a model with one region on the
# example backend through the installed CLI; its outputs must equal kiln's own.
# Usage: check_example.sh BUILD_DIR   (KILN_PYTHON: a Python with numpy and onnx)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
py=${KILN_PYTHON:-$root/.venv/bin/python}
work=$(mktemp -d /tmp/kiln-byoc.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$root/examples/byoc" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
plugin="$work/build/libkiln_example_backend.so"
kiln="$work/prefix/bin/kiln"
# x -> Relu -> Add(y) -> Tanh (the region), then Softmax (stays native).
"$py" - "$work/model.onnx" <<'PY'
import sys, onnx
from onnx import helper as h, TensorProto as T
g = h.make_graph([h.make_node("Relu", ["x"], ["r"]), h.make_node("Add", ["r", "y"], ["a"]),
                  h.make_node("Tanh", ["a"], ["t"]), h.make_node("Softmax", ["t"], ["z"], axis=-1)], "g",
                 [h.make_tensor_value_info("x", T.FLOAT, [2, 8]), h.make_tensor_value_info("y", T.FLOAT, [2, 8])],
                 [h.make_tensor_value_info("z", T.FLOAT, [2, 8])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), sys.argv[1])
PY
"$kiln" run "$work/model.onnx" --backend-plugin "$plugin" --offload example --output-dir "$work/ext" > "$work/ext.txt"
grep -q "3 offloaded in 1 region(s)" "$work/ext.txt" || { cat "$work/ext.txt"; echo "FAIL: the region did not run on the example backend"; exit 1; }
"$kiln" run "$work/model.onnx" --output-dir "$work/own" > /dev/null
# The environment variable loads it too (how Python and C API users reach plugins).
KILN_BACKEND_PLUGINS="$plugin" "$kiln" run "$work/model.onnx" --offload example | grep -q "3 offloaded in 1 region(s)" ||
  { echo "FAIL: KILN_BACKEND_PLUGINS did not load the example backend"; exit 1; }
"$py" -c "
import numpy as np, sys
a, b = np.load('$work/ext/z.npy'), np.load('$work/own/z.npy')
sys.exit(0 if np.allclose(a, b, rtol=1e-5, atol=1e-6) else 'FAIL: outputs differ by %g' % abs(a - b).max())"
"$kiln" inspect "$work/model.onnx" --backend-plugin "$plugin" --offload example | grep -q "example_0 (example): 3 nodes" ||
  { echo "FAIL: inspect --offload does not show the region"; exit 1; }
# A plugin without the init function is a usage error (exit 2), not a crash.
if "$kiln" run "$work/model.onnx" --backend-plugin "$build/lib/libkiln_runtime.so" --offload example 2> "$work/err.txt"; then
  echo "FAIL: a library without kiln_extension_init loaded"; exit 1
fi
grep -q "defines no kiln_extension_init" "$work/err.txt" || { cat "$work/err.txt"; exit 1; }
echo "byoc example: built out of tree, one region of 3 nodes on the example backend, outputs match"
