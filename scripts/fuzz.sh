#!/usr/bin/env bash
# A fuzzing campaign over kiln's input parsers (libFuzzer + ASan/UBSan, the `asan` preset):
#   fuzz_onnx_load    ONNX bytes -> importer -> interpreter preparation (every op's checks)
#   fuzz_text_ir      the text IR parser and its print/re-parse round trip
#   fuzz_aot_loader   the compiled-library seal/ELF checks and the embedded plan parser
# Each target runs for --minutes on a working corpus kept in build/asan/corpus/<target> (seeded
# from tests/fuzz/corpus/<target>, grown across campaigns); --merge then minimizes what the
# campaign found back into tests/fuzz/corpus/<target> (the corpus kept in the repository:
# inputs up to 8 KiB).
# Crash reproducers land in build/asan/artifacts/; the exit status is non-zero if any target
# crashed. Prints one summary line per target (executions, coverage, corpus size).
#   scripts/fuzz.sh --minutes N [--target NAME]... [--jobs J] [--merge]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MINUTES=""
TARGETS=()
JOBS=1
MERGE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) MINUTES=$2; shift 2 ;;
    --target) TARGETS+=("$2"); shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --merge) MERGE=1; shift ;;
    *) echo "usage: $0 --minutes N [--target NAME]... [--jobs J] [--merge]" >&2; exit 2 ;;
  esac
done
[ -n "$MINUTES" ] || { echo "usage: $0 --minutes N [--target NAME]... [--jobs J] [--merge]" >&2; exit 2; }
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(fuzz_onnx_load fuzz_text_ir fuzz_aot_loader)
command -v clang++ >/dev/null || { echo "clang++ not found (apt-get install clang)" >&2; exit 77; }

[ -f build/asan/build.ninja ] || cmake --preset asan >/dev/null
ninja -C build/asan "${TARGETS[@]}" >/dev/null
mkdir -p build/asan/artifacts
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
status=0
summary=()
for t in "${TARGETS[@]}"; do
  seeds=tests/fuzz/corpus/${t#fuzz_}
  [ "$t" = fuzz_onnx_load ] && seeds=tests/fuzz/corpus/onnx_import
  work=build/asan/corpus/$t
  mkdir -p "$work"
  cp -n "$seeds"/* "$work"/ 2>/dev/null || true
  log=build/asan/$t.log
  echo "[fuzz] $t for $MINUTES min (log: $log)" >&2
  rc=0
  build/asan/tests/fuzz/$t -max_total_time=$((MINUTES * 60)) -max_len=65536 -rss_limit_mb=4096 -timeout=30 \
    -jobs="$JOBS" -workers="$JOBS" -print_final_stats=1 -artifact_prefix="$ROOT/build/asan/artifacts/" \
    "$work" >"$log" 2>&1 || rc=$?
  rm -f fuzz-*.log  # with --jobs, the workers' logs repeat what the main log holds
  execs=$(grep -h 'stat::number_of_executed_units' "$log" | sort -u | awk '{s+=$2} END {print s+0}')
  cov=$(grep -o 'cov: [0-9]*' "$log" | awk '{print $2}' | sort -n | tail -1)
  summary+=("$t: $MINUTES min, $execs executions, coverage $cov edges, corpus $(ls "$work" | wc -l) files, exit $rc")
  if [ $rc -ne 0 ]; then status=1; grep -m3 -E 'ERROR|SUMMARY|crash-' "$log" >&2 || true; fi
  if [ $MERGE -eq 1 ]; then
    tmp=$(mktemp -d)
    # Inputs up to 8 KiB: the repository keeps a small corpus (the working one keeps everything).
    build/asan/tests/fuzz/$t -merge=1 -max_len=8192 "$tmp" "$seeds" "$work" >/dev/null 2>&1
    rm -f "$seeds"/*
    cp "$tmp"/* "$seeds"/
    rm -rf "$tmp"
  fi
done
printf '%s\n' "${summary[@]}"
exit $status
