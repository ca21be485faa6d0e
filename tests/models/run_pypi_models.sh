#!/usr/bin/env bash
# ctest wrapper for pypi_models.py (or, with --script NAME first after the two paths, another
# script of this folder taking KILN CACHE_DIR). Usage: run_pypi_models.sh KILN CACHE_DIR [--engine E]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${KILN_PYTHON:-$here/../../.venv/bin/python}
script=pypi_models.py
if [ "${3:-}" = --script ]; then
  script=$4
  set -- "$1" "$2" "${@:5}"
fi
exec "$py" "$here/$script" "$@" 2> >(grep -v 'CleanUnusedInitializers' >&2)
