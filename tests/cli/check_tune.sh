#!/bin/sh
# `kiln tune` end to end on a small conv model: a short search writes records; --records applies
# them (run twice: identical outputs; the AOT library compiled with them runs bit-identical to
# the JIT; inspect shows them); the worker survives a crashing and a hanging candidate (the
# KILN_TUNE_TEST_FAULT hook) and records both as invalid; records of another CPU are ignored with
# a note; bad input gets one-line errors with the documented exit codes.
# Usage: check_tune.sh KILN VENV_PYTHON (exit 77 = skipped: no venv).
kiln=$1 python=$2
[ -x "$python" ] || { echo "skipped: no .venv (./kiln.sh setup)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" - "$tmp/m.onnx" <<'PY' || exit 1
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
def w(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
         helper.make_node("Conv", ["c2", "w3"], ["y"])]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 24, 24])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [w("w1", 32, 16, 3, 3), w("b1", 32), w("w2", 64, 32, 3, 3), w("w3", 32, 64, 1, 1)])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
fail() { echo "$*"; exit 1; }
m=$tmp/m.onnx r=$tmp/r.jsonl
# (--no-offload: the kernel search on kiln's own kernels; the offload phase is checked below.)
"$kiln" tune "$m" --records "$r" --budget 20s --runs 3 --no-offload > "$tmp/out" 2> "$tmp/err" || fail "tune: $(cat "$tmp/out" "$tmp/err")"
grep -q "tasks' time" "$tmp/out" || fail "tune: no summary: $(cat "$tmp/out")"
[ "$(grep -c '"status":"ok"' "$r")" -ge 10 ] || fail "tune: too few ok records: $(head -3 "$r")"
# Three tunable convs: three tasks in the summary.
[ "$(grep -c '^Conv f32' "$tmp/out")" -eq 3 ] || fail "tune: want 3 tasks: $(cat "$tmp/out")"

# --records: deterministic, close to the default kernels, the library bit-identical to the JIT.
"$kiln" run "$m" --records "$r" -o "$tmp/a" > /dev/null || fail "run --records"
"$kiln" run "$m" --records "$r" -o "$tmp/b" > /dev/null || fail "run --records (again)"
"$kiln" run "$m" -o "$tmp/d" > /dev/null || fail "run"
"$kiln" compile "$m" --records "$r" -o "$tmp/m.so" > "$tmp/out" || fail "compile -o --records: $(cat "$tmp/out")"
grep -q "tuned_steps" "$tmp/out" || fail "compile -o --records: no tuned_steps: $(cat "$tmp/out")"
"$kiln" run "$tmp/m.so" -o "$tmp/l" > /dev/null || fail "run library"
"$python" - "$tmp" <<'PY' || fail "outputs differ"
import sys, numpy as np
d = sys.argv[1]
a, b, dflt, lib = (np.load(f"{d}/{k}/y.npy") for k in "abdl")
assert np.array_equal(a, b), "two runs with the same records differ"
assert np.array_equal(a, lib), "the library compiled with the records differs from the JIT"
assert np.allclose(a, dflt, rtol=1e-3, atol=1e-4), np.abs(a - dflt).max()
PY
"$kiln" inspect "$m" --records "$r" > "$tmp/out" || fail "inspect --records"
grep -q "tuning records" "$tmp/out" || fail "inspect --records: $(cat "$tmp/out")"
! grep -q '"key":"Offload ' "$r" || fail "--no-offload still ran the offload phase"

# The offload phase (kiln built with oneDNN): the whole model timed on kiln's kernels and with
# dnnl, both recorded; --records runs it the faster way, which matches kiln's own outputs.
if "$kiln" inspect "$m" --offload dnnl > /dev/null 2>&1; then
  "$kiln" tune "$m" --records "$tmp/o.jsonl" --budget 2s --runs 3 > "$tmp/out" 2> "$tmp/err" ||
    fail "tune with the offload phase: $(cat "$tmp/out" "$tmp/err")"
  [ "$(grep -c '"key":"Offload ' "$tmp/o.jsonl")" -eq 2 ] || fail "want 2 offload records: $(cat "$tmp/o.jsonl")"
  grep -q "^offload: model run kiln" "$tmp/out" || fail "no offload line: $(cat "$tmp/out")"
  "$kiln" run "$m" --records "$tmp/o.jsonl" -o "$tmp/o" > /dev/null || fail "run --records (offload phase)"
  "$python" -c "import numpy as np, sys; a, b = np.load('$tmp/o/y.npy'), np.load('$tmp/d/y.npy'); sys.exit(0 if np.allclose(a, b, rtol=1e-3, atol=1e-4) else 'offload records: outputs differ')"
fi

# A crashing and a hanging candidate: recorded as such, the search goes on.
# (Choices every conv task's space has on any ISA and thread count; --patience 1000 tries them all.)
crash="algo=gemm split=2x1" hang="algo=gemm-pixel-rows split=1x2"
KILN_TUNE_TEST_FAULT="crash=$crash;hang=$hang" "$kiln" tune "$m" --records "$tmp/f.jsonl" --budget 50s --runs 1 --no-offload \
  --timeout 3 --patience 1000 > "$tmp/out" 2> "$tmp/err" || fail "tune with faults: $(cat "$tmp/out" "$tmp/err")"
grep -q '"status":"crashed"' "$tmp/f.jsonl" || fail "no crashed record: $(grep -v '"ok"' "$tmp/f.jsonl")"
grep -q '"status":"timeout"' "$tmp/f.jsonl" || fail "no timeout record: $(grep -v '"ok"' "$tmp/f.jsonl")"
[ "$(grep -c '"status":"ok"' "$tmp/f.jsonl")" -ge 10 ] || fail "the search stopped after the faults"

# A records directory: this model's file in it, every file there applied.
mkdir "$tmp/dir" && cp "$r" "$tmp/dir/other-model.jsonl"
"$kiln" tune "$m" --records "$tmp/dir" --budget 3s --runs 1 --no-offload > "$tmp/out" 2> "$tmp/err" || fail "tune --records DIR: $(cat "$tmp/err")"
[ -s "$tmp/dir/m-t1.jsonl" ] || fail "tune --records DIR: no DIR/m-t1.jsonl: $(ls "$tmp/dir")"
grep -q '+' "$tmp/out" || fail "tune --records DIR: nothing reused from the directory: $(cat "$tmp/out")"
"$kiln" run "$m" --records "$tmp/dir" -o "$tmp/dd" > /dev/null || fail "run --records DIR"

# Records of another CPU: ignored, with a note.
sed 's/"cpu":"[^"]*"/"cpu":"Some Other CPU"/' "$r" > "$tmp/other.jsonl"
"$kiln" run "$m" --records "$tmp/other.jsonl" > /dev/null 2> "$tmp/err" || fail "run with other records"
grep -q "another CPU" "$tmp/err" || fail "no note on other-CPU records: $(cat "$tmp/err")"

# Bad input: one line, documented exit codes.
expect_error() {
  code=$1 sub=$2; shift 2
  "$kiln" "$@" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  [ $rc -eq "$code" ] || fail "kiln $*: exit $rc, want $code: $(cat "$tmp/err")"
  grep -qF -- "$sub" "$tmp/err" || fail "kiln $*: no '$sub' in: $(cat "$tmp/err")"
}
expect_error 2 "pass --resume" tune "$m" --records "$r" --budget 1s
expect_error 2 "--budget expects" tune "$m" --records "$tmp/new.jsonl" --budget 10x
echo '{"key": 1}' > "$tmp/bad.jsonl"
expect_error 4 "bad.jsonl:1: not a tuning record" run "$m" --records "$tmp/bad.jsonl"
expect_error 4 "cannot open the tuning records" bench "$m" --records "$tmp/missing.jsonl"
echo ok
