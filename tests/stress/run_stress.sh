#!/usr/bin/env bash
# The sanitizer runs of the stress tool (tests/stress/stress_sessions.cc).
#   tests/stress/run_stress.sh asan|tsan [SECONDS] [CYCLES]
#       The runtime under the sanitizer (what `./kiln.sh test` runs): builds the preset's
#       libkiln_runtime.a and stress_runtime, compiles two models (Conv, MatMul chain) with the
#       release `kiln compile` against that sanitized runtime, then runs CYCLES (default 1000)
#       cancel/run cycles on the chain and SECONDS (default 20) of 8 threads x 4 sessions
#       loading, running (with random cancels) and freeing both libraries.
#   tests/stress/run_stress.sh asan-full|tsan-full [SECONDS]
#       The whole library (importer, JIT compiler, executors) under the sanitizer: builds the
#       preset's stress_sessions (long: the full library) and runs the sessions stress on ONNX
#       models for SECONDS (default 300), then 1000 cancel cycles.
# Needs the release build (./kiln.sh build) for `kiln` and the model writer.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:?usage: run_stress.sh asan|tsan|asan-full|tsan-full [SECONDS] [CYCLES]}
preset=${mode%-full}
case $preset in
  asan)
    export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1 ${ASAN_OPTIONS:-}"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" ;;
  tsan) export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" ;;
  *) echo "unknown mode '$mode'" >&2; exit 2 ;;
esac
[ -f "build/$preset/build.ninja" ] || cmake --preset "$preset" >/dev/null
release=build/release
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The release writer makes the ONNX models (no sanitizer needed for that).
ninja -C "$release" stress_sessions kiln >/dev/null
"$release/tests/stress_sessions" write-models "$work"
if [ "$mode" = "$preset" ]; then
  cmake --build --preset "$preset" --target kiln_runtime_static stress_runtime
  for m in conv chain; do
    KILN_RUNTIME_LIB=$PWD/build/$preset/lib/libkiln_runtime.a \
      "$release/tools/kiln/kiln" compile "$work/$m.onnx" -o "$work/$m.so" >/dev/null
  done
  bin=build/$preset/tests/stress_runtime
  "$bin" cancel "$work/chain.so" --cycles "${3:-1000}"
  "$bin" sessions --threads 8 --sessions 4 --seconds "${2:-20}" "$work/conv.so" "$work/chain.so"
else
  cmake --build --preset "$preset" --target stress_sessions
  bin=build/$preset/tests/stress_sessions
  "$bin" sessions --threads 8 --sessions 4 --seconds "${2:-300}" "$work/conv.onnx" "$work/chain.onnx"
  "$bin" cancel "$work/chain.onnx" --cycles 1000
fi
