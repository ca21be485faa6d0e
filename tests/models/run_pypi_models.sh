#!/usr/bin/env bash
# ctest wrapper for pypi_models.py. Usage: run_pypi_models.sh KILN CACHE_DIR [--engine E]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${KILN_PYTHON:-$here/../../.venv/bin/python}
exec "$py" "$here/pypi_models.py" "$@" 2> >(grep -v 'CleanUnusedInitializers' >&2)
