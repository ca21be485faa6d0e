#!/usr/bin/env bash
# The lint checks can fail: check_layers.py on a tree with an include pointing up the layer table
# (and with a stale exception), function_lengths.py on a file with an over-long function.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
scripts=$here/../../scripts
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/runtime" "$tmp/src/driver" "$tmp/scripts"
printf '#include "driver/session.h"\n' > "$tmp/src/runtime/leak.cc"
printf '#include "runtime/exec_plan.h"\n' > "$tmp/src/driver/ok.cc"
: > "$tmp/scripts/layer_exceptions.txt"
if python3 "$scripts/check_layers.py" --root "$tmp" > "$tmp/out.txt"; then
  echo "FAIL: check_layers.py accepted src/runtime including driver/"; exit 1
fi
grep -q "src/runtime/leak.cc -> driver" "$tmp/out.txt" || { echo "FAIL: the violation is not named"; cat "$tmp/out.txt"; exit 1; }
echo "src/runtime/leak.cc -> driver" > "$tmp/scripts/layer_exceptions.txt"
python3 "$scripts/check_layers.py" --root "$tmp" > /dev/null || { echo "FAIL: a listed exception still fails"; exit 1; }
rm "$tmp/src/runtime/leak.cc"
if python3 "$scripts/check_layers.py" --root "$tmp" > /dev/null; then
  echo "FAIL: a stale exception was accepted"; exit 1
fi
{ echo "int long_one(int x) {"; for i in $(seq 1 160); do echo "  x += $i;"; done; echo "  return x;"; echo "}"; } > "$tmp/long.cc"
if python3 "$scripts/function_lengths.py" --max 150 "$tmp/long.cc" > /dev/null; then
  echo "FAIL: function_lengths.py accepted a 163-line function"; exit 1
fi
python3 "$scripts/function_lengths.py" --max 200 "$tmp/long.cc" > /dev/null
echo "1 passed, 0 failed"
