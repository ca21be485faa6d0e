#!/usr/bin/env bash
# Rewrites the expected-pass lists from the current build (review the diff before committing).
# Usage: tests/conformance/update_expected.sh [build/release]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/release}
d=/usr/share/libonnx-testdata/data
"$build/tools/kiln/kiln" test-onnx --write-passing tests/conformance/expected_pass_libonnx.txt \
  $d/node $d/simple $d/pytorch-converted $d/pytorch-operator | tail -1
"$build/tools/kiln/kiln" test-onnx --write-passing tests/conformance/expected_pass_wheel.txt \
  "$build/tests/wheel_node" | tail -1
