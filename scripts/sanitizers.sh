#!/usr/bin/env bash
# The sanitizer phase of `./kiln.sh test` (what CI runs), bounded to a few minutes once built:
#   ASan + UBSan + LeakSanitizer (preset asan, build/asan; the x86 microkernels uninstrumented):
#     every unit test (kiln_unit_tests), the libonnx node conformance suite on the
#     compiled engine, 1000 cancel/run cycles through the C API (JIT), and the runtime stress;
#     and `kiln serve` answering 60 s of malformed HTTP/gRPC requests (tests/serve/fuzz_requests.py);
#   ThreadSanitizer (preset tsan): 8 threads x 4 sessions loading, running, cancelling and
#     freeing compiled models (tests/stress/run_stress.sh); with KILN_SERVE_TSAN=1 also kiln
#     serve's tests (tests/serve) against a TSan build of the CLI.
# Longer runs: tests/stress/run_stress.sh asan-full|tsan-full SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\033[1m[kiln sanitizers]\033[0m %s\n' "$*" >&2; }
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
[ -f build/asan/build.ninja ] || cmake --preset asan >/dev/null
log "building the asan preset (kiln, kiln_unit_tests, stress_sessions)"
cmake --build --preset asan --target kiln kiln_unit_tests stress_sessions
log "unit tests under ASan+UBSan+LSan"
build/asan/tests/kiln_unit_tests --gtest_brief=1
log "libonnx node conformance, compiled engine, under ASan+UBSan"
build/asan/tools/kiln/kiln test-onnx --engine compiled --expected tests/conformance/expected_pass_libonnx.txt \
  /usr/share/libonnx-testdata/data/node | tail -n 1
log "1000 cancel/run cycles through the C API under ASan+LSan"
build/asan/tests/stress_sessions cancel --cycles 1000
PY="${KILN_PYTHON:-.venv/bin/python}"
log "kiln serve under ASan+UBSan+LSan: its tests, then 60 s of malformed HTTP and gRPC requests"
KILN=build/asan/tools/kiln/kiln "$PY" -m pytest -q -p no:cacheprovider tests/serve
"$PY" tests/serve/fuzz_requests.py build/asan/tools/kiln/kiln --seconds 60
log "the runtime under ASan, then ThreadSanitizer"
tests/stress/run_stress.sh asan 20 200
tests/stress/run_stress.sh tsan 20 200
# kiln serve under TSan needs the whole CLI built with TSan (about 6 more minutes on 2 cores from
# scratch): opt-in, so that CI stays near 30 minutes; run it with KILN_SERVE_TSAN=1.
if [ "${KILN_SERVE_TSAN:-0}" = 1 ]; then
  log "kiln serve's tests under ThreadSanitizer (suppressions: uninstrumented gRPC/Abseil/httplib only)"
  [ -f build/tsan/build.ninja ] || cmake --preset tsan >/dev/null
  cmake --build --preset tsan --target kiln
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/serve/tsan.supp" \
    KILN=build/tsan/tools/kiln/kiln "$PY" -m pytest -q -p no:cacheprovider tests/serve
fi
