#!/usr/bin/env python3
"""Load test of `kiln serve` on loopback (docs/serving.md quotes its numbers):

  1. throughput: wrk (closed loop, C connections, binary KServe v2 requests of one image) against
     the same model with and without dynamic batching, same threads: requests/s and p50/p90/p99;
  2. overload: an open-loop generator at 3x the measured capacity for a while: how many answers
     are fast 503s vs 200s and their latencies, then a recovery phase at half the capacity that
     must be all 200;
  3. sustained (--sustained-secs, default 0 = skip): wrk for that long, the server's resident
     memory sampled every 10 s, and halfway a new version of another model loaded (hot reload):
     0 failed requests allowed.

  serve_load.py KILN MODEL.onnx [--threads 2] [--connections 16] [--secs 30] [--sustained-secs 600]
                [--input NAME] [--json OUT.json]
The model needs a symbolic dim 0 (batch); inputs are one float32 image [1, 3, 224, 224] unless
the model declares otherwise."""
import argparse
import concurrent.futures
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import onnx


def input_spec(model_path):
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in inits)
    dims = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
    return inp.name, dims


def write_repository(root, model_path, threads, batch):
    for name, config in {
        "batched": {"max_batch_size": batch, "dynamic_batching": {"max_queue_delay_microseconds": 5000,
                                                                  "preferred_batch_size": [batch]},
                    "parameters": {"threads": threads}, "max_queue_size": 32},
        "unbatched": {"max_batch_size": batch, "parameters": {"threads": threads}, "max_queue_size": 32},
    }.items():
        os.makedirs(os.path.join(root, name, "1"))
        os.symlink(os.path.abspath(model_path), os.path.join(root, name, "1", "model.onnx"))
        with open(os.path.join(root, name, "config.json"), "w") as f:
            json.dump(config, f)


def request_body(name, dims, seed=0):
    x = np.random.default_rng(seed).random(dims, dtype=np.float32)
    header = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": dims,
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    return header + x.tobytes(), len(header)


WRK_SCRIPT = r"""
wrk.method = "POST"
local f = io.open("%(body)s", "rb"); wrk.body = f:read("*all"); f:close()
wrk.headers["Inference-Header-Content-Length"] = "%(header)d"
wrk.headers["Content-Type"] = "application/octet-stream"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p90_us": %%d, "p99_us": %%d, ' ..
    '"non2xx": %%d, "socket_errors": %%d}\n', summary.requests, summary.duration, latency:percentile(50),
    latency:percentile(90), latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))
end
"""


def run_wrk(url, script, connections, secs):
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{secs}s", "--timeout", "30s", "-s", script, url],
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(re.search(r"^WRK (.*)$", out, re.M).group(1))
    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
    return r


class Server:
    def __init__(self, kiln, repo, log):
        self.log = open(log, "w")
        self.proc = subprocess.Popen([kiln, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "-1",
                                      "--http-threads", "256"], stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://[0-9.]+:(\d+)", line)
        if not m:
            raise SystemExit(f"kiln serve did not start: {line!r}\n{open(log).read()[-2000:]}")
        self.port = int(m.group(1))

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024

    def post(self, path, body, headers, timeout=60):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", path, body=body, headers=headers)
            r = c.getresponse()
            r.read()
            return r.status
        finally:
            c.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(120)
        self.log.close()
        return rc


def open_loop(server, body, headers, rate, secs):
    """Requests at a fixed rate regardless of answers; returns [(status, seconds)]."""
    results, lock = [], threading.Lock()

    def one():
        t0 = time.monotonic()
        try:
            status = server.post("/v2/models/batched/infer", body, headers)
        except Exception as e:  # noqa: BLE001  (a refused or dropped connection counts as a failure)
            status = type(e).__name__
        with lock:
            results.append((status, time.monotonic() - t0))

    with concurrent.futures.ThreadPoolExecutor(max_workers=256) as pool:
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < secs:
            wait = start + n / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            pool.submit(one)
            n += 1
    return results


def overload_phase(server, body, headers, capacity, secs, report):
    """Open loop at 3x capacity, then half capacity: fast 503s, then all 200 again."""
    over = open_loop(server, body, headers, 3 * capacity, secs)
    ok = [t for s, t in over if s == 200]
    refused = [t for s, t in over if s == 503]
    other = [s for s, t in over if s not in (200, 503)]
    if other:
        print("overload: answers other than 200/503:", {k: other.count(k) for k in set(other)}, flush=True)
    recovery = open_loop(server, body, headers, 0.5 * capacity, 10)
    rec_fail = [s for s, t in recovery if s != 200]
    report["overload"] = {"rate": 3 * capacity, "requests": len(over), "ok": len(ok), "refused_503": len(refused),
                          "other": len(other), "ok_p50_ms": pct(ok, 50), "ok_p99_ms": pct(ok, 99),
                          "refused_p50_ms": pct(refused, 50), "refused_p99_ms": pct(refused, 99),
                          "recovery_requests": len(recovery), "recovery_failures": len(rec_fail)}
    o = report["overload"]
    print(f"overload at {o['rate']:.0f} req/s for {secs} s: {o['ok']} x 200 (p50 {o['ok_p50_ms']:.0f} ms, "
          f"p99 {o['ok_p99_ms']:.0f} ms), {o['refused_503']} x 503 (p50 {o['refused_p50_ms']:.1f} ms, "
          f"p99 {o['refused_p99_ms']:.1f} ms), {o['other']} other; recovery at half capacity: "
          f"{o['recovery_requests'] - o['recovery_failures']}/{o['recovery_requests']} x 200", flush=True)


def pct(values, q):
    return float(np.percentile(values, q)) * 1000 if values else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8, help="max_batch_size of the batched model")
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--secs", type=int, default=30)
    ap.add_argument("--overload-secs", type=int, default=20)
    ap.add_argument("--sustained-secs", type=int, default=0)
    ap.add_argument("--json")
    args = ap.parse_args()
    name, dims = input_spec(args.model)
    work = tempfile.mkdtemp(prefix="kiln-serve-load-")
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    write_repository(repo, args.model, args.threads, args.batch)
    body, header_len = request_body(name, dims)
    with open(os.path.join(work, "body.bin"), "wb") as f:
        f.write(body)
    headers = {"Inference-Header-Content-Length": str(header_len), "Content-Type": "application/octet-stream"}
    report = {"model": os.path.basename(args.model), "threads": args.threads, "connections": args.connections}
    server = Server(args.kiln, repo, os.path.join(work, "server.log"))
    try:
        for model in ("batched", "unbatched"):  # warm: the first run of each shape compiles
            for b in (1, args.batch):
                x, hl = request_body(name, [b] + dims[1:])
                assert server.post(f"/v2/models/{model}/infer", x, {"Inference-Header-Content-Length": str(hl)}) == 200
        script = os.path.join(work, "post.lua")
        with open(script, "w") as f:
            f.write(WRK_SCRIPT % {"body": os.path.join(work, "body.bin"), "header": header_len})
        for model in ("unbatched", "batched"):
            r = run_wrk(f"http://127.0.0.1:{server.port}/v2/models/{model}/infer", script, args.connections, args.secs)
            report[model] = r
            print(f"{model:10s} {r['rps']:7.1f} req/s  p50 {r['p50_us'] / 1000:7.1f} ms  p90 {r['p90_us'] / 1000:7.1f} ms  "
                  f"p99 {r['p99_us'] / 1000:7.1f} ms  non-2xx {r['non2xx']}  socket errors {r['socket_errors']}", flush=True)
        report["batching_speedup"] = report["batched"]["rps"] / report["unbatched"]["rps"]
        print(f"batching: {report['batching_speedup']:.2f}x the throughput", flush=True)

        capacity = report["batched"]["rps"]
        if args.overload_secs <= 0:
            report["overload"] = {"recovery_failures": 0, "other": 0}
        else:
            overload_phase(server, body, headers, capacity, args.overload_secs, report)

        if args.sustained_secs:
            samples = []
            stop = threading.Event()

            def sample():
                while not stop.wait(10):
                    samples.append(server.rss_mib())

            def reload_other():
                if not stop.wait(args.sustained_secs / 2):
                    shutil.copytree(os.path.join(repo, "unbatched", "1"), os.path.join(repo, "unbatched", "2"), symlinks=True)
                    report["reload_status"] = server.post("/v2/repository/models/unbatched/load", b"{}", {})

            threads = [threading.Thread(target=sample), threading.Thread(target=reload_other)]
            for t in threads:
                t.start()
            r = run_wrk(f"http://127.0.0.1:{server.port}/v2/models/batched/infer", script, args.connections, args.sustained_secs)
            stop.set()
            for t in threads:
                t.join()
            report["sustained"] = dict(r, rss_mib=samples)
            print(f"sustained {args.sustained_secs} s: {r['requests']} requests, {r['rps']:.1f} req/s, non-2xx {r['non2xx']}, "
                  f"socket errors {r['socket_errors']}, p99 {r['p99_us'] / 1000:.0f} ms; RSS MiB first {samples[0]:.0f}, "
                  f"last {samples[-1]:.0f}, max {max(samples):.0f}; reload of another model: HTTP {report.get('reload_status')}",
                  flush=True)
    finally:
        report["server_exit"] = server.stop()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    failed = report["overload"]["recovery_failures"] or report["overload"]["other"] or report["server_exit"] != 0
    if "sustained" in report:
        failed = failed or report["sustained"]["non2xx"] or report["sustained"]["socket_errors"] or report.get("reload_status") != 200
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
