#!/usr/bin/env bash
# kiln's one entry point for set-up, build, demo and tests on Debian 12.
#   ./kiln.sh demo   install what is missing, build, run the OCR demo against ONNX Runtime
#   ./kiln.sh test   install what is missing, build, run every test (what CI runs)
#   ./kiln.sh build  install what is missing and build (release preset)
#   ./kiln.sh wheel  build, then the redistributable Python wheel into dist/ (scripts/build_wheel.sh)
#   ./kiln.sh setup  only install what is missing
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
PRESET=${KILN_PRESET:-release}
VENV=$ROOT/.venv

APT_PACKAGES=(cmake ninja-build ccache g++ clang libclang-rt-14-dev pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata llvm-19-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev libfreeimage-dev libtiff-dev libcpp-httplib-dev
  libgrpc++-dev protobuf-compiler-grpc libdnnl-dev
  python3 python3-venv python3-pip python3-dev)
# Exporting ResNet-50 / the BERT-like encoder for the model tests (Debian's torch is far
# lighter than the PyPI wheel; run with /usr/bin/python3) and Chromium for the HTML view test.
TEST_APT_PACKAGES=(python3-torch python3-torchvision python3-onnx chromium)
PIP_PACKAGES=(numpy onnx onnxruntime pytest "tritonclient[http,grpc]")

# ccache: objects do not depend on the build dir's path (the Python package links build/release's
# libraries when they exist and compiles them in build/python only when they do not).
export CCACHE_NOHASHDIR=true

log() { printf '\033[1m[kiln]\033[0m %s\n' "$*" >&2; }

# Runs "$@" as one named phase and says how long it took (the phases of demo and test).
phase() {
  local name=$1 start=$SECONDS
  shift
  "$@"
  log "$name took $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s"
}

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

setup() {
  apt_install "${APT_PACKAGES[@]}"
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating the Python virtualenv in .venv"
    python3 -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -c "import numpy, onnx, onnxruntime, pytest, tritonclient.http, tritonclient.grpc" 2>/dev/null; then
    log "installing Python packages: ${PIP_PACKAGES[*]}"
    "$VENV/bin/pip" install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
  fi
}

# build [TARGET...]: the preset's build, all targets or only those named.
build() {
  phase setup setup
  log "building (preset $PRESET${1:+, targets: $*})"
  cmake --preset "$PRESET" >/dev/null
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  phase build cmake --build --preset "$PRESET" "${targets[@]}"
}

cmd=${1:-demo}
shift || true
case "$cmd" in
  setup) setup ;;
  build) build ;;
  wheel)
    # What the wheel carries: the driver's libraries (for the extension), the CLI, the runtime.
    build kiln_driver kiln kiln_runtime_static
    phase wheel scripts/build_wheel.sh dist
    ;;
  demo)
    # Only the CLI the demo runs (the tests and benchmarks build with ./kiln.sh test).
    build kiln
    phase demo "$VENV/bin/python" demo/ocr_demo.py --kiln "build/$PRESET/tools/kiln/kiln" "$@"
    ;;
  test)
    phase "test packages" apt_install "${TEST_APT_PACKAGES[@]}"
    build
    log "running tests"
    export KILN_PYTHON="$VENV/bin/python"
    phase ctest ctest --test-dir "build/$PRESET" --output-on-failure -j 2 "$@"
    log "testing the Python package (pip install . into a clean virtualenv, then pytest)"
    phase "Python package" scripts/test_python_package.sh
    log "sanitizers: ASan+UBSan+LSan and ThreadSanitizer builds (scripts/sanitizers.sh)"
    phase sanitizers scripts/sanitizers.sh
    ;;
  *)
    echo "usage: ./kiln.sh [setup|build|demo|test|wheel]" >&2
    exit 2
    ;;
esac
