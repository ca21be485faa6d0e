#!/usr/bin/env python3
"""ONNX Runtime side of `kiln bench --compare onnxruntime`.

Runs MODEL on the given .npy inputs with the CPU execution provider (intra-op threads =
--threads, inter-op threads 1, sequential execution, default graph optimizations), times it
the way kiln does (warm-up runs, then runs until --min-time seconds and at least --min-runs),
writes each output as OUTPUT_DIR/<index>.npy and prints one JSON line:
{"median_ms": ..., "min_ms": ..., "runs": ..., "load_ms": ..., "first_run_ms": ..., "ort_version": ...}

With --serve it times nothing by itself: after the warm-up it writes the outputs, prints
{"ready": true, "load_ms": ..., "first_run_ms": ..., "ort_version": ...} and then answers each
stdin line "SECONDS RUNS" with {"times_ms": [...]} (runs for at least SECONDS and RUNS), until
EOF. kiln bench uses it to alternate timing rounds of kiln and ONNX Runtime, so that a noisy
machine slows both alike.

Usage: ort_runner.py MODEL --input NAME=FILE.npy ... [--threads N] [--warmup W]
                     [--min-time S] [--min-runs R] [--output-dir DIR] [--serve]
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort


def write_outputs(output_dir, outs):
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
        for i, o in enumerate(outs):
            np.save(os.path.join(output_dir, f"{i}.npy"), np.ascontiguousarray(o))


def time_runs(sess, feeds, seconds, runs):
    times = []
    start = time.perf_counter()
    while len(times) < runs or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[], help="NAME=FILE.npy")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--min-runs", type=int, default=10)
    ap.add_argument("--output-dir")
    ap.add_argument("--serve", action="store_true", help="answer timing requests on stdin (see above)")
    a = ap.parse_args()

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3

    feeds = {}
    for spec in a.input:
        name, _, path = spec.partition("=")
        feeds[name] = np.load(path)
    t0 = time.perf_counter()
    outs = sess.run(None, feeds)
    first_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(a.warmup - 1):
        sess.run(None, feeds)
    if a.serve:
        write_outputs(a.output_dir, outs)
        print(json.dumps({"ready": True, "load_ms": load_ms, "first_run_ms": first_ms,
                          "ort_version": ort.__version__}), flush=True)
        for line in sys.stdin:
            seconds, runs = line.split()
            times = time_runs(sess, feeds, float(seconds), int(runs))
            print(json.dumps({"times_ms": times}), flush=True)
        return 0
    times = sorted(time_runs(sess, feeds, a.min_time, a.min_runs))
    n = len(times)
    median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    write_outputs(a.output_dir, outs)
    print(json.dumps({"median_ms": median, "min_ms": times[0], "runs": n, "load_ms": load_ms,
                      "first_run_ms": first_ms, "ort_version": ort.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
