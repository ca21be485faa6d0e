#!/usr/bin/env bash
# Runs every model of the malformed-model corpus through `kiln run` (and `kiln inspect`) and checks
# the documented failure: the exit code, exactly one line on stderr, and a given substring.
#   tests/errors/run_errors.sh KILN_BINARY
# expected.txt lines: <model file> <exit code> <substring...>. `kiln inspect` only loads the model,
# so it must either succeed (problems found only when running) or fail exactly like `kiln run`.
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 KILN_BINARY" >&2
  exit 2
fi
KILN=$1
HERE=$(cd "$(dirname "$0")" && pwd)
MODELS=$HERE/models
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

# check NAME CMD CODE SUBSTRING RC: validates the stderr captured in $TMP/err.
check() {
  local name=$1 cmd=$2 want=$3 sub=$4 rc=$5 lines
  lines=$(wc -l < "$TMP/err")
  if [ "$rc" -ne "$want" ]; then
    echo "FAIL $name ($cmd): exit code $rc, expected $want; stderr: $(head -c 500 "$TMP/err")"
    return 1
  fi
  if [ "$lines" -ne 1 ] || [ "$(wc -c < "$TMP/err")" -le 1 ]; then
    echo "FAIL $name ($cmd): stderr has $lines lines, expected exactly one:"
    head -c 1000 "$TMP/err"
    return 1
  fi
  if ! grep -qF -- "$sub" "$TMP/err"; then
    echo "FAIL $name ($cmd): message does not contain '$sub': $(cat "$TMP/err")"
    return 1
  fi
  return 0
}

while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in ''|'#'*) continue ;; esac
  name=${line%% *}
  rest=${line#* }
  code=${rest%% *}
  sub=${rest#* }
  model=$MODELS/$name
  if [ ! -e "$model" ]; then
    echo "FAIL $name: missing (run tests/errors/make_corpus.py)"
    failed=$((failed + 1))
    continue
  fi
  ok=1
  timeout 60 "$KILN" run "$model" > "$TMP/out" 2> "$TMP/err"
  check "$name" run "$code" "$sub" $? || ok=0
  timeout 60 "$KILN" inspect "$model" > "$TMP/out" 2> "$TMP/err"
  rc=$?
  if [ $rc -ne 0 ]; then check "$name" inspect "$code" "$sub" $rc || ok=0; fi
  if [ $ok -eq 1 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
done < "$HERE/expected.txt"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
