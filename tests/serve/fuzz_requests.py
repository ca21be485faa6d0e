#!/usr/bin/env python3
"""Malformed-request fuzzing of `kiln serve` (HTTP and gRPC) for a bounded time: mutated valid
requests (byte flips, truncation, insertion), structurally wrong ones (shapes, dtypes, data,
binary lengths, headers, deep nesting), random paths, and raw garbage over gRPC. Every answer
must be a protocol answer (HTTP 200/400/404/413/503/504 with a JSON error for failures; a gRPC
status), the server must stay live, and it must exit 0 on SIGTERM: under an ASan build
(scripts/sanitizers.sh) a memory error or a leak fails that exit.

  fuzz_requests.py KILN [--seconds S] [--seed N]"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OK_HTTP = {200, 400, 404, 413, 503, 504}


def model_two_inputs():
    """z = cast(a, f32) * b + 1: an int64 and a float input, batch dim N."""
    g = helper.make_graph([helper.make_node("Cast", ["a"], ["af"], to=TensorProto.FLOAT),
                           helper.make_node("Mul", ["af", "b"], ["m"]), helper.make_node("Add", ["m", "one"], ["z"])],
                          "two", [helper.make_tensor_value_info("a", TensorProto.INT64, ["N", 3]),
                                  helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 3])],
                          [numpy_helper.from_array(np.ones((1,), np.float32), "one")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def valid_bodies():
    a = {"name": "a", "datatype": "INT64", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]}
    b = {"name": "b", "datatype": "FP32", "shape": [2, 3], "data": [[0.5, 1, 2], [3, 4, 5]]}
    yield json.dumps({"id": "x", "inputs": [a, b]}).encode(), {}
    raw = np.arange(6, dtype=np.int64).tobytes()
    rawb = np.ones(6, np.float32).tobytes()
    header = json.dumps({"inputs": [{"name": "a", "datatype": "INT64", "shape": [2, 3], "parameters": {"binary_data_size": 48}},
                                    {"name": "b", "datatype": "FP32", "shape": [2, 3], "parameters": {"binary_data_size": 24}}],
                         "outputs": [{"name": "z", "parameters": {"binary_data": True}}]}).encode()
    yield header + raw + rawb, {"Inference-Header-Content-Length": str(len(header))}


def mutate(body, rng):
    b = bytearray(body)
    for _ in range(rng.randint(1, 8)):
        op = rng.randrange(4)
        if op == 0 and b:
            b[rng.randrange(len(b))] = rng.randrange(256)
        elif op == 1 and b:
            del b[rng.randrange(len(b)):]
        elif op == 2:
            pos = rng.randrange(len(b) + 1)
            b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        elif op == 3:
            pos = rng.randrange(len(b) + 1)
            b[pos:pos] = rng.choice([b"[", b"]", b"{", b"}", b",", b'"', b"-1", b"1e308", b"9" * 30, b"null", b"true"])
    return bytes(b)


def structured(rng):
    dims = rng.choice([[2, 3], [0, 3], [-1, 3], [2 ** 62, 2], [1] * rng.randint(0, 40), [3], [2, 3, 1], [9, 3], [2, 4]])
    dtype = rng.choice(["FP32", "INT64", "FP16", "BOOL", "BYTES", "UINT8", "FP64", "bogus", 7, None])
    data = rng.choice([[1] * 6, [], [[1, 2, 3]] * 2, "abc", [True] * 6, [1.5] * 6, [[[[1]]]], None, [2 ** 70] * 6, [-1] * 6,
                       [[1, 2], [3]], {"k": 1}])
    inp = {"name": rng.choice(["a", "b", "zz", "", 5]), "datatype": dtype, "shape": dims, "data": data}
    if rng.random() < 0.3:
        inp["parameters"] = {"binary_data_size": rng.choice([0, 6, 48, -5, 2 ** 63, "x"])}
        inp.pop("data")
    body = {"inputs": rng.choice([[inp], [inp, inp], [], "no", None])}
    if rng.random() < 0.3:
        body["outputs"] = rng.choice([[{"name": "z"}], [{"name": "nope"}], [{}], "x", [{"name": "z", "parameters": {"binary_data": 3}}]])
    if rng.random() < 0.2:
        body["parameters"] = {"timeout": rng.choice([1, -1, "x", 10 ** 9]), "binary_data_output": rng.choice([True, 3])}
    text = json.dumps(body).encode()
    headers = {}
    if rng.random() < 0.3:
        headers["Inference-Header-Content-Length"] = rng.choice([str(len(text)), "0", "-1", "x", str(len(text) + 100), str(2 ** 64)])
        text += bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    return text, headers


def http_case(rng, bodies):
    path = rng.choice(["/v2/models/two/infer"] * 6 + ["/v2/models/two/versions/1/infer", "/v2/models/two/versions/9/infer",
                                                      "/v2/models/none/infer", "/v2/models//infer", "/v2/models/two",
                                                      "/v2/repository/index", "/v2/models/" + "a" * 5000 + "/infer"])
    r = rng.random()
    if r < 0.45:
        body, headers = rng.choice(bodies)
        body = mutate(body, rng)
    elif r < 0.9:
        body, headers = structured(rng)
    else:
        body, headers = b"[" * rng.randint(1, 200000), {}
    return rng.choice(["POST"] * 9 + ["GET"]), path, body, dict(headers)


def check_http(port, method, path, body, headers):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
    finally:
        c.close()
    if r.status not in OK_HTTP and not (r.status == 404 and method == "GET"):
        raise AssertionError(f"{method} {path}: HTTP {r.status} {data[:200]!r} for body {body[:200]!r}")
    if r.status >= 400 and data and r.status != 413:
        json.loads(data)["error"]  # a protocol error body


def grpc_case(channel, rng, bodies_pb):
    call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
    payload = mutate(rng.choice(bodies_pb), rng) if rng.random() < 0.7 else bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    try:
        call(payload, timeout=60)
    except grpc.RpcError as e:
        if e.code() not in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE,
                            grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL, grpc.StatusCode.RESOURCE_EXHAUSTED):
            raise
        # gRPC answers bytes that do not parse as the message with INTERNAL and no details
        # (or a parse message); kiln's own INTERNAL errors always say what failed.
        details = (e.details() or "").strip().lower()
        if e.code() == grpc.StatusCode.INTERNAL and details and "pars" not in details and "deserializ" not in details:
            raise AssertionError(f"gRPC INTERNAL: {e.details()}")


def grpc_bodies():
    from tritonclient.grpc import service_pb2
    r = service_pb2.ModelInferRequest(model_name="two")
    r.inputs.add(name="a", datatype="INT64", shape=[2, 3])
    r.inputs.add(name="b", datatype="FP32", shape=[2, 3])
    r.raw_input_contents.extend([np.arange(6, dtype=np.int64).tobytes(), np.ones(6, np.float32).tobytes()])
    t = service_pb2.ModelInferRequest(model_name="two")
    t.inputs.add(name="a", datatype="INT64", shape=[1, 3]).contents.int64_contents.extend([1, 2, 3])
    t.inputs.add(name="b", datatype="FP32", shape=[1, 3]).contents.fp32_contents.extend([1, 2, 3])
    return [r.SerializeToString(), t.SerializeToString()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    repo = tempfile.mkdtemp(prefix="kiln-serve-fuzz-")
    os.makedirs(os.path.join(repo, "two", "1"))
    onnx.save(model_two_inputs(), os.path.join(repo, "two", "1", "model.onnx"))
    with open(os.path.join(repo, "two", "config.json"), "w") as f:
        json.dump({"max_batch_size": 4, "dynamic_batching": {"max_queue_delay_microseconds": 500}, "max_queue_size": 8}, f)
    log_path = os.path.join(repo, "server.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([args.kiln, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                             "--threads", "1", "--max-request-size", "4M"], stdout=subprocess.PIPE, stderr=log, text=True)
    line = proc.stdout.readline()
    m = re.search(r"http://[0-9.]+:(\d+), grpc [0-9.]+:(\d+)", line)
    if not m:
        print(f"fuzz_requests: the server did not start: {line!r}\n{open(log_path).read()[-3000:]}", file=sys.stderr)
        return 1
    port, grpc_port = int(m.group(1)), int(m.group(2))
    bodies, bodies_pb = list(valid_bodies()), grpc_bodies()
    n_http = n_grpc = 0
    failure = None
    end = time.monotonic() + args.seconds
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            while time.monotonic() < end:
                if rng.random() < 0.75:
                    check_http(port, *http_case(rng, bodies))
                    n_http += 1
                else:
                    grpc_case(channel, rng, bodies_pb)
                    n_grpc += 1
                if (n_http + n_grpc) % 200 == 0:
                    check_http(port, "GET", "/v2/health/live", b"", {})
    except Exception as e:  # noqa: BLE001
        failure = e
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = "hung on SIGTERM"
    log.close()
    text = open(log_path).read()
    sanitizer = re.search(r"ERROR: (Address|Leak|UndefinedBehavior)Sanitizer.*", text) or re.search(r"runtime error:.*", text)
    print(f"fuzz_requests: {n_http} HTTP and {n_grpc} gRPC requests in {args.seconds:.0f} s, server exit {rc}")
    if failure or rc != 0 or sanitizer:
        print(f"fuzz_requests: FAILED: {failure or ''} {sanitizer.group(0) if sanitizer else ''}\n{text[-4000:]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
