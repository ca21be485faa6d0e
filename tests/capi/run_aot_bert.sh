#!/usr/bin/env bash
# AOT on the BERT-like encoder (attention's batched MatMuls, shape chains folded from the bound
# dims, int64 inputs): `kiln compile -o` with seq bound, then the library's outputs through
# `kiln run model.so` compared byte for byte with the JIT compiled engine's on the same inputs.
# Usage: run_aot_bert.sh KILN OUT_DIR. Exit 77 (skipped) without the model and without torch.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kiln=$1
out=$2
mkdir -p "$out"
model=$("$here/../models/find_model.sh" bert_like "$out") || exit $?
# input_ids and attention_mask, int64 [1,64], as .npy (standard library only).
/usr/bin/python3 - "$out" <<'PY'
import struct, sys
def save(path, values):
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (1, %d), }" % len(values)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%dq" % len(values), *values))
save(sys.argv[1] + "/ids.npy", [(i * 7919) % 1000 for i in range(64)])
save(sys.argv[1] + "/mask.npy", [1] * 60 + [0] * 4)
PY
"$kiln" compile "$model" -o "$out/bert.so" --dim batch=1 --dim seq=64
rm -rf "$out/aot" "$out/jit"
"$kiln" run "$out/bert.so" -i "$out/ids.npy" -i "$out/mask.npy" -o "$out/aot" >/dev/null
"$kiln" run "$model" --engine compiled -i "$out/ids.npy" -i "$out/mask.npy" -o "$out/jit" >/dev/null
status=0
for f in "$out"/jit/*.npy; do
  if cmp "$out/aot/$(basename "$f")" "$f"; then
    echo "aot_bert_like: $(basename "$f") is byte-identical to the JIT compiled engine's"
  else
    echo "aot_bert_like: FAIL: $(basename "$f") differs from the JIT compiled engine's"
    status=1
  fi
done
rm -f "$out/bert.so"  # 0.4 GB of weights
exit $status
