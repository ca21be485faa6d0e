#!/usr/bin/env bash
# Exports the benchmark models (once) and runs `kiln bench --compare onnxruntime --json` at each
# thread count, writing bench/results/<engine>-t<threads>.json; then regenerates
# docs/performance.md from every JSON file in bench/results.
#
#   bench/run_bench.sh [MODEL ...]          (default: the whole set of bench/export_models.py)
#
# Environment: KILN (the kiln binary, default build/release/tools/kiln/kiln), ENGINE (interp or
# compiled, default compiled if it runs, else interp), THREADS (default "1 2"), BATCH (default 1),
# MIN_TIME (seconds per model and engine, default 2), SETTLE_MS (kiln bench --settle-ms, default 50), MODEL_DIR (default build/bench-models),
# TORCH_PYTHON (default /usr/bin/python3, needs torch + torchvision), KILN_PYTHON (the Python with
# onnxruntime, default .venv/bin/python), NO_DOC=1 to skip docs/performance.md. Lines of
# bench/results/NOTES (if any) become the notes section of docs/performance.md.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KILN="${KILN:-$ROOT/build/release/tools/kiln/kiln}"
THREADS="${THREADS:-1 2}"
BATCH="${BATCH:-1}"
MIN_TIME="${MIN_TIME:-2}"
# Fine alternation (12 rounds of at least 2 runs a side) so that a burst of load from other
# tenants hits kiln and ONNX Runtime alike even for the 200-300 ms models.
ROUNDS="${ROUNDS:-12}"
MIN_RUNS="${MIN_RUNS:-24}"
SETTLE_MS="${SETTLE_MS:-50}"
MODEL_DIR="${MODEL_DIR:-$ROOT/build/bench-models}"
TORCH_PYTHON="${TORCH_PYTHON:-/usr/bin/python3}"
export KILN_PYTHON="${KILN_PYTHON:-$ROOT/.venv/bin/python}"
RESULTS="$ROOT/bench/results"
ALL_MODELS="resnet18 resnet50 mobilenet_v2 mobilenet_v3_small squeezenet1_1 shufflenet_v2_x1_0 efficientnet_b0 vit_b_16 bert_like mlp"
MODELS=("$@")
[ ${#MODELS[@]} -eq 0 ] && read -r -a MODELS <<< "$ALL_MODELS"

[ -x "$KILN" ] || { echo "run_bench.sh: no kiln binary at $KILN (build it or set KILN)" >&2; exit 2; }
"$TORCH_PYTHON" "$ROOT/bench/export_models.py" "$MODEL_DIR" "${MODELS[@]}"

if [ -z "${ENGINE:-}" ]; then
  ENGINE=interp
  if "$KILN" bench "$MODEL_DIR/${MODELS[0]}.onnx" --engine compiled --warmup 1 --min-time 0 --min-runs 1 \
       >/dev/null 2>&1; then ENGINE=compiled; fi
fi

mkdir -p "$RESULTS"
status=0
for t in $THREADS; do
  out="$RESULTS/$ENGINE-t$t.json"
  echo "== kiln bench --engine $ENGINE --threads $t --batch $BATCH: ${MODELS[*]} -> $out" >&2
  # One process per model, so that one failing model does not lose the others' results.
  tmp="$(mktemp -d)"
  for m in "${MODELS[@]}"; do
    if ! "$KILN" bench "$MODEL_DIR/$m.onnx" --engine "$ENGINE" --threads "$t" --batch "$BATCH" \
         --min-time "$MIN_TIME" --min-runs "$MIN_RUNS" --rounds "$ROUNDS" --settle-ms "$SETTLE_MS" --compare onnxruntime --json > "$tmp/$m.json" 2> "$tmp/$m.err"; then
      echo "run_bench.sh: $m: kiln bench failed or outputs differ: $(tail -c 300 "$tmp/$m.err")" >&2
      status=1
    fi
  done
  "$KILN_PYTHON" - "$out" "$ENGINE" "$t" "$BATCH" "$tmp" "${MODELS[@]}" <<'PY'
import json, os, sys
out, engine, threads, batch, tmp, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6:]
merged = {"engine": engine, "threads": threads, "batch": batch, "results": []}
for m in models:
    try:
        d = json.load(open(os.path.join(tmp, m + ".json")))
    except Exception:
        err = open(os.path.join(tmp, m + ".err")).read().strip()
        merged["results"].append({"model": m, "engine": engine, "threads": threads, "batch": batch,
                                  "error": err[-500:] or "kiln bench failed"})
        continue
    merged.update({k: v for k, v in d.items() if k != "results"})
    merged["results"] += d["results"]
json.dump(merged, open(out, "w"), indent=1)
PY
  rm -rf "$tmp"
done

[ "${NO_DOC:-0}" = 1 ] || "$KILN_PYTHON" "$ROOT/bench/make_performance_md.py" "$RESULTS"/*.json \
  --notes-file "$RESULTS/NOTES" --rounds "$ROUNDS" --settle-ms "$SETTLE_MS" --min-runs "$MIN_RUNS" --min-time "$MIN_TIME" \
  -o "$ROOT/docs/performance.md"
exit $status
