#!/usr/bin/env bash
# AOT end to end on ResNet-50: `kiln compile -o` (timed), the C example (tests its load time),
# and a byte comparison of its output .npy with `kiln run --engine compiled` (the
# same pass pipeline, JIT) on the same input. Prints compile time, .so size and load time.
# Usage: run_aot_resnet50.sh KILN RUN_MODEL OUT_DIR. Exit 77 (skipped) without the model.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kiln=$1
example=$2
out=$3
mkdir -p "$out"
model=$("$here/../models/find_model.sh" resnet50 "$out") || exit $?
# A deterministic float32 input [1,3,224,224] as .npy (standard library only).
/usr/bin/python3 - "$out/input.npy" <<'PY'
import math, struct, sys
n = 3 * 224 * 224
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 224, 224), }"
header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<%df" % n, *[math.sin(0.001 * i) for i in range(n)]))
PY
start=$(date +%s.%N)
"$kiln" compile "$model" -o "$out/resnet50.so" --time
end=$(date +%s.%N)
echo "compile -o wall time: $(echo "$end - $start" | bc) s; library size: $(stat -c %s "$out/resnet50.so") bytes"
"$example" "$out/resnet50.so" "$out/input.npy" "$out/aot_output.npy"
rm -rf "$out/jit"
"$kiln" run "$model" --engine compiled --input "$out/input.npy" --output-dir "$out/jit" >/dev/null
jit=$(ls "$out"/jit/*.npy | head -n 1)
if cmp "$out/aot_output.npy" "$jit"; then
  echo "aot_resnet50: AOT output is byte-identical to the JIT compiled engine's ($jit)"
else
  echo "aot_resnet50: FAIL: AOT output differs from the JIT compiled engine's ($jit)"
  exit 1
fi
