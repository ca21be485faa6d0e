#!/bin/sh
# `kiln bench --compare onnxruntime`: kiln and ONNX Runtime alternate timing rounds on the same
# inputs; the JSON has both timings, the ratio and the output check; a broken ORT side is
# reported (exit 1, note) instead of crashing. Usage: check_bench.sh KILN VENV_PYTHON MODEL
# (exit 77 = skipped: no venv or no model).
kiln=$1 python=$2 model=$3
[ -x "$python" ] || { echo "skipped: no .venv (./kiln.sh setup)"; exit 77; }
[ -f "$model" ] || { echo "skipped: no $model"; exit 77; }
out=$(KILN_PYTHON="$python" "$kiln" bench "$model" --compare onnxruntime --min-time 0.3 --min-runs 6 --rounds 3 --json) ||
  { echo "kiln bench failed: $out"; exit 1; }
echo "$out"
echo "$out" | "$python" -c '
import json, sys
r = json.load(sys.stdin)["results"][0]
assert r["outputs_match"] is True, r
assert r["kiln_ms"]["runs"] >= 6 and r["ort_ms"]["runs"] >= 6, r
assert r["ratio"] > 0 and abs(r["ratio"] - r["kiln_ms"]["median"] / r["ort_ms"]["median"]) < 1e-3, r
assert r["sqnr_db"] is None, r  # a float model: checked by rtol/atol
' || exit 1
# A runner that cannot start: exit 1 with the reason, no hang or crash.
out=$(KILN_PYTHON=/bin/false "$kiln" bench "$model" --compare onnxruntime --min-time 0.1 2>&1)
rc=$?
[ $rc -eq 1 ] || { echo "broken runner: want exit 1, got $rc: $out"; exit 1; }
echo "$out" | grep -q "onnxruntime failed" || { echo "broken runner: no reason given: $out"; exit 1; }
echo "ok"
