#!/usr/bin/env bash
# CI's short fuzz run (scripts/sanitizers.sh): builds the libFuzzer targets of the `asan` preset
# (clang++, ASan+UBSan) and runs each target for SECONDS on a scratch copy of its seed corpus (tests/fuzz/corpus/<name>): the ONNX
# importer, the text-IR parser and the compiled-library loader checks. Exits non-zero when a
# fuzzer finds a crash (the reproducer is left in build/asan/artifacts/), 77 when clang++ is not
# available. Long campaigns: scripts/fuzz.sh --minutes N.
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
# The loader's plan seeds (first byte odd) must be in the current blob format, else every one of
# them stops at the version check and the plan parser goes unfuzzed.
want=$(sed -n 's/.*kPlanBlobVersion = \([0-9]*\);.*/\1/p' src/runtime/plan_io.h)
stale=0
for f in tests/fuzz/corpus/aot_loader/*; do
  read -r -a bytes <<< "$(od -An -tu1 -N13 "$f" | tr -s ' \n' ' ')"
  if [ "${#bytes[@]}" -ge 13 ] && [ $((bytes[0] % 2)) -eq 1 ] && [ "${bytes[9]}" != "$want" ]; then stale=$((stale + 1)); fi
done
if [ "$stale" -gt 0 ]; then
  echo "tests/fuzz/corpus/aot_loader: $stale plan seeds are not in blob format $want; remake them (tests/fuzz/fuzz_aot_loader.cc says how)" >&2
  exit 1
fi
if [ ! -f build/asan/build.ninja ]; then cmake --preset asan > /dev/null; fi
# KILN_FUZZER=NAME runs one target (fuzz_onnx_load also prepares the interpreter).
TARGETS=${KILN_FUZZER:-fuzz_onnx_import fuzz_text_ir fuzz_aot_loader}
ninja -C build/asan $TARGETS > /dev/null
mkdir -p build/asan/artifacts
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
# The targets run side by side (each for SECONDS of wall time), then report in order.
declare -A WORKS PIDS
for FUZZER in $TARGETS; do
  case $FUZZER in
    fuzz_onnx_import | fuzz_onnx_load) SEEDS=onnx_import ;;
    *) SEEDS=${FUZZER#fuzz_} ;;
  esac
  WORK=$(mktemp -d)
  cp tests/fuzz/corpus/$SEEDS/* "$WORK/"
  build/asan/tests/fuzz/"$FUZZER" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -rss_limit_mb=4096 \
    -timeout=30 -print_final_stats=1 -artifact_prefix="$ROOT/build/asan/artifacts/" "$@" "$WORK" \
    > "$WORK.log" 2>&1 &
  WORKS[$FUZZER]=$WORK
  PIDS[$FUZZER]=$!
done
status=0
for FUZZER in $TARGETS; do
  WORK=${WORKS[$FUZZER]}
  rc=0
  wait "${PIDS[$FUZZER]}" || rc=$?
  echo "== $FUZZER ($SECONDS_TO_RUN s, exit $rc)"
  grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|ERROR|SUMMARY|crash-|internal error" "$WORK.log" || true
  [ "$rc" -eq 0 ] || { tail -n 40 "$WORK.log"; status=$rc; }
  rm -rf "$WORK" "$WORK.log"
done
exit "$status"
