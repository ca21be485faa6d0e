#!/usr/bin/env python3
"""kiln with and without --offload BACKEND against ONNX Runtime, per model and thread count.

Each configuration is one `kiln bench --compare onnxruntime --json` run (kiln and ORT alternate in
rounds within it), the two back to back per model, so `kiln/ORT` and `BACKEND/ORT` are each
measured in one run; `BACKEND/kiln` is their quotient (normalized by ORT, whose medians move with
the host's load). Prints a Markdown table and writes the raw JSON to bench/results/offload/<backend>.json.

    bench/offload_bench.py [--backend dnnl] [--threads 1 2] [--min-time 2] [MODEL ...]
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "squeezenet1_1", "shufflenet_v2_x1_0",
          "efficientnet_b0", "vit_b_16", "bert_like", "mlp"]


def bench(kiln, model, threads, extra, args):
    cmd = [kiln, "bench", model, "--threads", str(threads), "--compare", "onnxruntime", "--json",
           "--min-time", str(args.min_time), "--rounds", str(args.rounds)] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=MODELS)
    p.add_argument("--backend", default="dnnl")
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--min-time", type=float, default=2)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--kiln", default=os.path.join(ROOT, "build/release/tools/kiln/kiln"))
    p.add_argument("--model-dir", default=os.path.join(ROOT, "build/bench-models"))
    args = p.parse_args()
    rows, raw = [], []
    for threads in args.threads:
        for name in args.models:
            model = os.path.join(args.model_dir, name + ".onnx")
            own = bench(args.kiln, model, threads, [], args)
            ext = bench(args.kiln, model, threads, ["--offload", args.backend], args)
            raw += [own, ext]
            a, b = own["results"][0], ext["results"][0]
            rows.append((name, threads, a["kiln_ms"]["median"], b["kiln_ms"]["median"],
                         (a["ort_ms"]["median"] + b["ort_ms"]["median"]) / 2, a["ratio"], b["ratio"],
                         b["ratio"] / a["ratio"], a["outputs_match"] and b["outputs_match"]))
            print(f"{name} t{threads}: kiln/ORT {a['ratio']:.2f}, {args.backend}/ORT {b['ratio']:.2f}", file=sys.stderr)
    cpu = raw[0]["cpu"] if raw else "?"
    print(f"CPU: {cpu}, {raw[0]['target'] if raw else ''}\n")
    print(f"| model | threads | kiln ms | kiln + {args.backend} ms | ORT ms | kiln/ORT | {args.backend}/ORT | "
          f"{args.backend}/kiln | outputs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.2f} | {r[6]:.2f} | {r[7]:.2f} | "
              f"{'match' if r[8] else 'DIFFER'} |")
    for threads in args.threads:
        sel = [r for r in rows if r[1] == threads]
        if not sel:
            continue
        geo = lambda k: __import__("math").exp(sum(__import__("math").log(r[k]) for r in sel) / len(sel))
        print(f"\ngeomean at {threads} thread(s): kiln/ORT {geo(5):.2f}, {args.backend}/ORT {geo(6):.2f}, "
              f"{args.backend}/kiln {geo(7):.2f}")
    os.makedirs(os.path.join(ROOT, "bench/results/offload"), exist_ok=True)
    with open(os.path.join(ROOT, "bench/results/offload", f"{args.backend}.json"), "w") as f:
        json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
