#!/usr/bin/env python3
"""Runs one BERT-like session (kiln.load, the Python API) over random (batch, seq) pairs and
reports what a new input shape costs beyond its run (planning: shapes, lowering, LLVM or the
kernel disk cache) and the process's resident memory as signatures come and go.

Two measures of the cost: the plan's build time as the engine reports it (Session.plan_stats:
shapes, lowering, LLVM when a kernel is new) and the first run minus a second run of the same
shapes (which also counts first-touch page faults, but is noisy when a run takes seconds).

  bench/shape_sweep.py [MODEL] [--pairs 100] [--max-batch 8] [--max-seq 512] [--threads 1]

Needs the kiln package (pip install .) and numpy. Prints one line per pair and a summary:
median / p90 extra cost of a new pair, and resident memory after the first 10 pairs vs the end.
"""
import argparse
import statistics
import time

import numpy as np

import kiln


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="build/bench-models/bert_like.onnx")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--min-seq", type=int, default=16)
    ap.add_argument("--max-seq", type=int, default=512)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sess = kiln.load(a.model, threads=a.threads)
    rng = np.random.default_rng(a.seed)
    extra, rss, plan_ms, llvm_pairs = [], [], [], 0
    for k in range(a.pairs):
        b, t = int(rng.integers(1, a.max_batch + 1)), int(rng.integers(a.min_seq, a.max_seq + 1))
        feeds = {"input_ids": rng.integers(0, 1000, (b, t)).astype(np.int64),
                 "attention_mask": np.ones((b, t), np.int64)}
        t0 = time.perf_counter()
        sess.run(feeds)
        first = (time.perf_counter() - t0) * 1e3
        st = sess.plan_stats()
        if st["planned"]:
            plan_ms.append(st["total_ms"])
            llvm_pairs += st["library_kernels"] < st["compiled_kernels"]
        t0 = time.perf_counter()
        sess.run(feeds)
        again = (time.perf_counter() - t0) * 1e3
        extra.append(first - again)
        rss.append(rss_mb())
        print(f"{k:4d} batch {b} seq {t:3d}: first {first:7.1f} ms, again {again:7.1f} ms, "
              f"new-shape cost {first - again:6.1f} ms, plan {st['total_ms']:6.1f} ms "
              f"({st['library_kernels']}/{st['compiled_kernels']} kernels from earlier plans), rss {rss[-1]:.0f} MB",
              flush=True)
    extra.sort()
    later = sorted(plan_ms[1:]) or [0.0]
    print(f"planning a new pair (after the first): median {statistics.median(later):.1f} ms, "
          f"p90 {later[int(0.9 * (len(later) - 1))]:.1f} ms, max {later[-1]:.1f} ms; "
          f"pairs that ran LLVM: {llvm_pairs} of {len(plan_ms)}")
    base = rss[min(9, len(rss) - 1)]
    print(f"new-shape cost: median {statistics.median(extra):.1f} ms, p90 {extra[int(0.9 * (len(extra) - 1))]:.1f} ms; "
          f"resident memory {base:.0f} MB after {min(10, len(rss))} pairs, {rss[-1]:.0f} MB after {len(rss)} "
          f"({100 * (rss[-1] / base - 1):+.1f}%)")


if __name__ == "__main__":
    main()
