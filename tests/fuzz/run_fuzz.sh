#!/usr/bin/env bash
# Builds the `fuzz` preset (clang++, libFuzzer, ASan+UBSan) and runs the ONNX importer fuzzer for
# SECONDS on a scratch copy of the seed corpus. Exits non-zero when the fuzzer finds a crash (the
# reproducer is left in build/fuzz/artifacts/), 77 when clang++ is not available.
#   tests/fuzz/run_fuzz.sh SECONDS [extra libFuzzer flags...]
set -eu
if [ $# -lt 1 ]; then
  echo "usage: $0 SECONDS [libFuzzer flags...]" >&2
  exit 2
fi
SECONDS_TO_RUN=$1
shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if ! command -v clang++ > /dev/null; then
  echo "clang++ not found: skipping the fuzz run" >&2
  exit 77
fi
cd "$ROOT"
if [ ! -f build/fuzz/build.ninja ]; then cmake --preset fuzz > /dev/null; fi
FUZZER=${KILN_FUZZER:-fuzz_onnx_import}  # fuzz_onnx_load also prepares the interpreter
ninja -C build/fuzz "$FUZZER" > /dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp tests/fuzz/corpus/* "$WORK/"
mkdir -p build/fuzz/artifacts
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
build/fuzz/tests/fuzz/"$FUZZER" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -rss_limit_mb=4096 \
  -timeout=30 -print_final_stats=1 -artifact_prefix="$ROOT/build/fuzz/artifacts/" "$@" "$WORK"
