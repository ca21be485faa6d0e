"""`kiln serve` end to end: NVIDIA's tritonclient (HTTP and gRPC) against the KServe v2 server on
loopback, a real model (PP-OCRv4 recognition, trained weights) checked against ONNX Runtime,
dynamic batching, protocol errors for malformed requests, overload, timeouts, version reload,
unload/load and graceful shutdown. Each test module starts its own server on a free port and
stops it by its process id, pass or fail.

Environment: KILN (the CLI; default build/release/tools/kiln/kiln)."""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import grpc
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KILN = os.environ.get("KILN", os.path.join(ROOT, "build", "release", "tools", "kiln", "kiln"))
sys.path.insert(0, os.path.join(ROOT, "demo"))
import ocr_demo  # noqa: E402  (the demo's model download and preprocessing)


# ---- models and repository ---------------------------------------------------------------------

def save(model, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    onnx.save(model, path)


def matmul_relu(scale):
    """y = relu(x @ W * scale), x: [N, 4]."""
    w = numpy_helper.from_array((np.arange(12, dtype=np.float32).reshape(4, 3) - 5) * scale, "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
                          "simple", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def slow_model(layers=12, width=384):
    """A chain of MatMul+Tanh: tens of milliseconds per request on one thread."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), f"W{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"W{i}"], [f"m{i}"]), helper.make_node("Tanh", [f"m{i}"], [f"t{i}"])]
        prev = f"t{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    g = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def write_config(repo, name, config):
    with open(os.path.join(repo, name, "config.json"), "w") as f:
        json.dump(config, f)


def make_repository(repo):
    save(matmul_relu(1.0), os.path.join(repo, "simple", "1", "model.onnx"))
    write_config(repo, "simple", {"max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": 20000},
                                  "instance_group": [{"count": 2}]})
    save(matmul_relu(1.0), os.path.join(repo, "reloadable", "1", "model.onnx"))
    save(slow_model(), os.path.join(repo, "slow", "1", "model.onnx"))
    write_config(repo, "slow", {"max_queue_size": 2})
    os.makedirs(os.path.join(repo, "compiled", "1"))
    subprocess.run([KILN, "compile", os.path.join(repo, "simple", "1", "model.onnx"), "--dim", "N=2",
                    "-o", os.path.join(repo, "compiled", "1", "model.so")], check=True, capture_output=True)
    # One library, a plan per batch size 1..4: dynamic batching may form any of them.
    os.makedirs(os.path.join(repo, "compiled_batched", "1"))
    subprocess.run([KILN, "compile", os.path.join(repo, "simple", "1", "model.onnx"), "--dim", "N=1,2,3,4",
                    "-o", os.path.join(repo, "compiled_batched", "1", "model.so")], check=True, capture_output=True)
    write_config(repo, "compiled_batched", {"max_batch_size": 4,
                                            "dynamic_batching": {"max_queue_delay_microseconds": 20000}})
    ocr_demo.fetch_model()
    os.makedirs(os.path.join(repo, "ocr", "1"), exist_ok=True)
    shutil.copy(ocr_demo.MODEL, os.path.join(repo, "ocr", "1", "model.onnx"))
    write_config(repo, "ocr", {"max_batch_size": 4, "dynamic_batching": {"max_queue_delay_microseconds": 2000},
                               "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [3, 48, -1]}],
                               "model_warmup": [{"batch_size": 2, "inputs": {"x": {"dims": [3, 48, 320]}}}]})


# ---- the server process ------------------------------------------------------------------------

class Server:
    def __init__(self, repo, log_path, *args, wait=True):
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([KILN, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                                      "--threads", "1", *args], stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.port = self.grpc_port = None
        if wait:
            line = self.proc.stdout.readline()  # printed once every model is loaded
            m = re.search(r"listening on http://[0-9.]+:(\d+), grpc [0-9.]+:(\d+)", line)
            assert m, f"kiln serve did not start: {line!r}; log: {open(log_path).read()[-2000:]}"
            self.port, self.grpc_port = int(m.group(1)), int(m.group(2))
        self.url = f"127.0.0.1:{self.port}"
        self.grpc_url = f"127.0.0.1:{self.grpc_port}"

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def request(self, method, path, body=b"", headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return r.status, r.read(), dict(r.getheaders())
        finally:
            conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    repo = str(tmp_path_factory.mktemp("repo"))
    make_repository(repo)
    s = Server(repo, os.path.join(repo, "server.log"))
    s.repo = repo
    yield s
    assert s.stop() == 0, open(os.path.join(repo, "server.log")).read()[-3000:]


@pytest.fixture()
def client(server):
    c = httpclient.InferenceServerClient(server.url, concurrency=16, network_timeout=120)
    yield c
    c.close()


@pytest.fixture()
def grpc_client(server):
    c = grpcclient.InferenceServerClient(server.grpc_url)
    yield c
    c.close()


def infer_simple(client, x, binary=True, model="simple"):
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    out = httpclient.InferRequestedOutput("y", binary_data=binary)
    return client.infer(model, [inp], outputs=[out]).as_numpy("y")


def expected_simple(x, scale=1.0):
    w = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5) * scale
    return np.maximum(x @ w, 0)


def metric(server, name, model):
    _, body, _ = server.request("GET", "/metrics")
    m = re.search(rf'^{name}{{model="{model}",version="\d+"}} (\d+)$', body.decode(), re.M)
    return int(m.group(1)) if m else None


# ---- tritonclient: metadata, repository, inference --------------------------------------------

def test_tritonclient_metadata_and_repository(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.get_server_metadata()["name"] == "kiln"
    assert client.is_model_ready("ocr") and not client.is_model_ready("no_such_model")
    meta = client.get_model_metadata("ocr")
    assert meta["inputs"][0]["name"] == "x" and meta["inputs"][0]["datatype"] == "FP32"
    assert meta["inputs"][0]["shape"] == [-1, 3, 48, -1] and meta["versions"] == ["1"]  # config.json fixes H
    config = client.get_model_config("simple")
    assert config["max_batch_size"] == 8 and config["input"][0]["dims"] == [4]
    assert config["instance_group"] == [{"count": 2, "kind": "KIND_CPU"}]
    names = {m["name"]: m["state"] for m in client.get_model_repository_index()}
    assert names == {"simple": "READY", "reloadable": "READY", "slow": "READY", "ocr": "READY", "compiled": "READY",
                     "compiled_batched": "READY"}


@pytest.mark.parametrize("binary", [True, False])
def test_tritonclient_infer_real_model_matches_onnxruntime(client, binary):
    gray = ocr_demo.read_pgm(os.path.join(ROOT, "demo", "images", "line0.pgm"))
    x = ocr_demo.preprocess(gray)
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x, binary_data=binary)
    result = client.infer("ocr", [inp], outputs=[httpclient.InferRequestedOutput("softmax_11.tmp_0", binary_data=binary)])
    got = result.as_numpy("softmax_11.tmp_0")
    want = ort.InferenceSession(ocr_demo.MODEL, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    assert (got.argmax(-1) == want.argmax(-1)).all()  # the decoded text is the same


def test_tritonclient_grpc_metadata_config_and_repository(grpc_client):
    c = grpc_client
    assert c.is_server_live() and c.is_server_ready() and c.is_model_ready("ocr")
    assert not c.is_model_ready("no_such_model")
    assert c.get_server_metadata(as_json=True)["name"] == "kiln"
    meta = c.get_model_metadata("ocr", as_json=True)
    assert meta["inputs"][0]["shape"] == ["-1", "3", "48", "-1"] and meta["versions"] == ["1"]
    config = c.get_model_config("simple", as_json=True)["config"]
    assert config["max_batch_size"] == 8 and config["input"][0]["data_type"] == "TYPE_FP32"
    assert config["input"][0]["dims"] == ["4"] and "dynamic_batching" in config
    assert {m["name"] for m in c.get_model_repository_index(as_json=True)["models"]} >= {"simple", "ocr", "slow"}


def test_tritonclient_grpc_infer_real_model_matches_onnxruntime(grpc_client):
    x = ocr_demo.preprocess(ocr_demo.read_pgm(os.path.join(ROOT, "demo", "images", "line0.pgm")))
    inp = grpcclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    got = grpc_client.infer("ocr", [inp]).as_numpy("softmax_11.tmp_0")
    want = ort.InferenceSession(ocr_demo.MODEL, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_tritonclient_grpc_errors_have_protocol_codes(server, grpc_client):
    bad = grpcclient.InferInput("x", [2, 5], "FP32")
    bad.set_data_from_numpy(np.zeros((2, 5), np.float32))
    with pytest.raises(InferenceServerException, match="INVALID_ARGUMENT.*expected shape"):
        grpc_client.infer("simple", [bad])
    with pytest.raises(InferenceServerException, match="NOT_FOUND.*unknown model"):
        grpc_client.infer("nope", [bad])
    # Bytes that are not a ModelInferRequest, and raw contents that do not match the shape.
    with grpc.insecure_channel(server.grpc_url) as ch:
        call = ch.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        with pytest.raises(grpc.RpcError):
            call(b"\xff\xff\xff\x0f garbage")
    req = grpcclient.service_pb2.ModelInferRequest(model_name="simple")
    t = req.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    req.raw_input_contents.append(b"\0" * 8)
    with grpc.insecure_channel(server.grpc_url) as ch:
        stub = grpcclient.service_pb2_grpc.GRPCInferenceServiceStub(ch)
        with pytest.raises(grpc.RpcError, match="holds 8 bytes"):
            stub.ModelInfer(req)
        del req.raw_input_contents[:]
        t.contents.fp32_contents.extend([1, 2, 3, 4])  # typed contents
        out = stub.ModelInfer(req)
        y = np.frombuffer(out.raw_output_contents[0], np.float32).reshape(1, 3)
        np.testing.assert_allclose(y, expected_simple(np.array([[1, 2, 3, 4]], np.float32)))
    assert grpc_client.is_server_live()


def test_config_dims_are_enforced(client):
    x = np.zeros((1, 3, 32, 320), np.float32)  # the model takes any height; config.json says 48
    inp = httpclient.InferInput("x", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException, match=r"expected shape \[-1,3,48,-1\]"):
        client.infer("ocr", [inp])


def test_tritonclient_async_requests_are_batched(server, client):
    before = metric(server, "kiln_inference_exec_count_total", "simple") or 0
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((1 + i % 2, 4)).astype(np.float32) for i in range(12)]
    pending = []
    for x in inputs:
        inp = httpclient.InferInput("x", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        pending.append(client.async_infer("simple", [inp]))
    for x, p in zip(inputs, pending):
        np.testing.assert_allclose(p.get_result().as_numpy("y"), expected_simple(x), rtol=1e-5, atol=1e-5)
    executions = metric(server, "kiln_inference_exec_count_total", "simple") - before
    assert executions < len(inputs), f"{len(inputs)} requests ran as {executions} executions: no batching"


def test_compiled_library_is_served(client):
    meta = client.get_model_metadata("compiled")
    assert meta["inputs"][0]["shape"] == [2, 4]  # `kiln compile --dim N=2`: fixed shapes
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 4
    np.testing.assert_allclose(infer_simple(client, x, model="compiled"), expected_simple(x), rtol=1e-5)
    with pytest.raises(InferenceServerException, match="expected shape"):
        infer_simple(client, np.ones((1, 4), np.float32), model="compiled")


def test_compiled_library_of_several_batch_sizes_is_served(client):
    meta = client.get_model_metadata("compiled_batched")
    assert meta["inputs"][0]["shape"] == [-1, 4]  # `kiln compile --dim N=1,2,3,4`
    for rows in (1, 3, 4):
        x = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) / 4
        np.testing.assert_allclose(infer_simple(client, x, model="compiled_batched"), expected_simple(x), rtol=1e-5)
    with pytest.raises(InferenceServerException, match="max_batch_size|batch"):
        infer_simple(client, np.ones((5, 4), np.float32), model="compiled_batched")


def test_json_input_nested_lists_and_json_output(server):
    body = {"id": "r1", "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [[1, 2, 3, 4], [0, 0, 0, 1]]}]}
    status, data, _ = server.request("POST", "/v2/models/simple/infer", json.dumps(body))
    assert status == 200, data
    out = json.loads(data)
    assert out["id"] == "r1" and out["model_version"] == "1"
    y = np.array(out["outputs"][0]["data"], np.float32).reshape(out["outputs"][0]["shape"])
    np.testing.assert_allclose(y, expected_simple(np.array([[1, 2, 3, 4], [0, 0, 0, 1]], np.float32)))


# ---- protocol errors: never a crash ------------------------------------------------------------

def binary_request(header, payload):
    text = json.dumps(header).encode()
    return text + payload, {"Inference-Header-Content-Length": str(len(text)), "Content-Type": "application/octet-stream"}


MALFORMED = [
    ("not json", b"{inputs: [", {}, 400, "not valid JSON"),
    ("truncated json", b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "da', {}, 400, "not valid JSON"),
    ("not an object", b"[1, 2]", {}, 400, "JSON object"),
    ("no inputs", b"{}", {}, 400, "inputs"),
    ("wrong dtype", json.dumps({"inputs": [{"name": "x", "datatype": "INT64", "shape": [1, 4], "data": [1, 2, 3, 4]}]}).encode(),
     {}, 400, "expected datatype"),
    ("unknown dtype", json.dumps({"inputs": [{"name": "x", "datatype": "FP128", "shape": [1, 4], "data": [1]}]}).encode(),
     {}, 400, "not supported"),
    ("bytes dtype", json.dumps({"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "data": ["a"]}]}).encode(),
     {}, 400, "BYTES"),
    ("wrong shape", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 5], "data": [1] * 5}]}).encode(),
     {}, 400, "expected shape"),
    ("too few values", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2]}]}).encode(),
     {}, 400, "2 values"),
    ("strings as data", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ["a"] * 4}]}).encode(),
     {}, 400, "expected numbers"),
    ("huge dims", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2 ** 40, 2 ** 40], "data": []}]}).encode(),
     {}, 400, "elements"),
    ("negative dim", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4], "data": []}]}).encode(),
     {}, 400, "size >= 0"),
    ("rank 40", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1] * 40, "data": [1]}]}).encode(),
     {}, 400, "rank"),
    ("batch over max", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [9, 4], "data": [0] * 36}]}).encode(),
     {}, 400, "max_batch_size"),
    ("unknown input", json.dumps({"inputs": [{"name": "z", "datatype": "FP32", "shape": [1, 4], "data": [0] * 4}]}).encode(),
     {}, 400, "no input named"),
    ("input twice", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0] * 4}] * 2}).encode(),
     {}, 400, "twice"),
    ("unknown output", json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0] * 4}],
                                   "outputs": [{"name": "nope"}]}).encode(), {}, 400, "no output named"),
    ("binary shorter than declared",
     *binary_request({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 16}}]},
                     b"\0" * 8), 400, "more binary bytes"),
    ("binary size not the shape's",
     *binary_request({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 12}}]},
                     b"\0" * 12), 400, "does not match"),
    ("binary left over",
     *binary_request({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "parameters": {"binary_data_size": 16}}]},
                     b"\0" * 20), 400, "no input claims"),
    ("header length past the end", b"{}", {"Inference-Header-Content-Length": "999"}, 400, "past the end"),
    ("header length not a number", b"{}", {"Inference-Header-Content-Length": "abc"}, 400, "byte count"),
]


@pytest.mark.parametrize("name,body,headers,status,message", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_request_gets_protocol_error(server, name, body, headers, status, message):
    got, data, _ = server.request("POST", "/v2/models/simple/infer", body, headers)
    assert got == status, data
    assert message in json.loads(data)["error"]
    assert server.request("GET", "/v2/health/live")[0] == 200


def test_unknown_model_and_version_are_not_found(server):
    assert server.request("POST", "/v2/models/nope/infer", b"{}")[0] == 404
    assert server.request("GET", "/v2/models/simple/versions/7")[0] == 404
    assert server.request("GET", "/v2/models/simple/versions/1")[0] == 200
    assert server.request("GET", "/v2/models/..%2f..%2fetc/ready")[0] in (400, 404)


def test_body_over_the_limit_is_refused(tmp_path):
    repo = str(tmp_path)
    save(matmul_relu(1.0), os.path.join(repo, "simple", "1", "model.onnx"))
    s = Server(repo, os.path.join(repo, "server.log"), "--max-request-size", "1K")
    try:
        assert s.request("POST", "/v2/models/simple/infer", b"{" + b" " * 4096 + b"}")[0] == 413
        assert s.request("GET", "/v2/health/live")[0] == 200
    finally:
        assert s.stop() == 0


# ---- scheduling: overload, timeouts ------------------------------------------------------------

def test_overload_is_refused_at_once_and_recovers(server):
    x = np.random.default_rng(2).standard_normal((256, 384)).astype(np.float32)
    body, headers = binary_request({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                                "parameters": {"binary_data_size": x.nbytes}}]}, x.tobytes())
    results = []

    def send():
        t0 = time.monotonic()
        status, data, _ = server.request("POST", "/v2/models/slow/infer", body, headers)
        results.append((status, time.monotonic() - t0, data))

    threads = [threading.Thread(target=send) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    refused = [r for r in results if r[0] == 503]
    served = [r for r in results if r[0] == 200]
    assert len(refused) + len(served) == len(results), [r[:2] for r in results]
    assert refused and served, [r[:2] for r in results]
    assert all("at capacity" in json.loads(r[2])["error"] for r in refused)
    assert max(r[1] for r in refused) < min(2.0, max(r[1] for r in served))  # refusals do not wait
    _, text, _ = server.request("GET", "/metrics")
    m = re.search(r'^kiln_inference_request_failure_total\{model="slow",version="1",reason="unavailable"\} (\d+)$',
                  text.decode(), re.M)
    assert m and int(m.group(1)) >= len(refused)
    assert server.request("POST", "/v2/models/slow/infer", body, headers)[0] == 200  # recovered


def test_request_timeout(server):
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0] * 4}], "parameters": {"timeout": 1}}
    status, data, _ = server.request("POST", "/v2/models/simple/infer", json.dumps(body))
    assert status == 504 and "timeout" in json.loads(data)["error"]


def test_timeout_answers_by_the_deadline_while_the_model_is_busy(server):
    big = np.zeros((8192, 384), np.float32)  # about 29 GFLOP
    body, headers = binary_request({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(big.shape),
                                                "parameters": {"binary_data_size": big.nbytes}}]}, big.tobytes())
    busy = {}

    def long_request():
        t0 = time.monotonic()
        busy["status"] = server.request("POST", "/v2/models/slow/infer", body, headers)[0]
        busy["secs"] = time.monotonic() - t0

    t = threading.Thread(target=long_request)
    t.start()
    while not metric(server, "kiln_inference_executing", "slow"):  # until it runs
        time.sleep(0.005)
    quick = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 384], "data": [0] * 384}],
             "parameters": {"timeout": 20000}}
    t0 = time.monotonic()
    status, data, _ = server.request("POST", "/v2/models/slow/infer", json.dumps(quick))
    waited = time.monotonic() - t0
    t.join()
    assert busy["status"] == 200
    assert status == 504 and "timeout" in json.loads(data)["error"], data
    assert waited < busy["secs"], (waited, busy["secs"])


# ---- repository: versions, reload under load, unload -------------------------------------------

def test_new_version_reload_keeps_other_models_serving(server, client):
    stop = threading.Event()
    failures, served = [], [0]

    def traffic():
        c = httpclient.InferenceServerClient(server.url, network_timeout=120)
        x = np.ones((1, 4), np.float32)
        while not stop.is_set():
            try:
                np.testing.assert_allclose(infer_simple(c, x), expected_simple(x))
                served[0] += 1
            except Exception as e:  # noqa: BLE001  (any failure counts)
                failures.append(repr(e))
        c.close()

    t = threading.Thread(target=traffic)
    t.start()
    try:
        save(matmul_relu(2.0), os.path.join(server.repo, "reloadable", "2", "model.onnx"))
        client.load_model("reloadable")
        assert client.get_model_metadata("reloadable")["versions"] == ["2"]
        x = np.full((1, 4), 1.0, np.float32)
        np.testing.assert_allclose(infer_simple(client, x, model="reloadable"), expected_simple(x, 2.0))
        with pytest.raises(InferenceServerException):
            client.get_model_metadata("reloadable", model_version="1")
    finally:
        stop.set()
        t.join()
    assert not failures and served[0] > 0, failures[:3]


def test_unload_and_load_over_grpc(grpc_client):
    grpc_client.unload_model("reloadable")
    assert not grpc_client.is_model_ready("reloadable")
    grpc_client.load_model("reloadable")
    assert grpc_client.is_model_ready("reloadable")


def test_unload_and_load(client):
    client.unload_model("reloadable")
    assert not client.is_model_ready("reloadable")
    with pytest.raises(InferenceServerException, match="unknown model"):
        infer_simple(client, np.ones((1, 4), np.float32), model="reloadable")
    client.load_model("reloadable")
    assert client.is_model_ready("reloadable")


def test_metrics_exposition(server):
    status, body, headers = server.request("GET", "/metrics")
    text = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert re.search(r'^kiln_inference_request_success_total\{model="ocr",version="1"\} [1-9]', text, re.M)
    assert re.search(r'^kiln_inference_batch_size_bucket\{model="simple",version="1",le="\+Inf"\} [1-9]', text, re.M)
    assert "# TYPE kiln_inference_batch_size histogram" in text


# ---- lifecycle: bad configs, graceful shutdown ------------------------------------------------

def test_bad_config_names_the_field(tmp_path):
    repo = str(tmp_path)
    save(matmul_relu(1.0), os.path.join(repo, "good", "1", "model.onnx"))
    save(matmul_relu(1.0), os.path.join(repo, "bad", "1", "model.onnx"))
    write_config(repo, "bad", {"max_batch_size": 4, "dynamic_batching": {"preferred_batch_size": [16]}})
    save(matmul_relu(1.0), os.path.join(repo, "misnamed", "1", "model.onnx"))
    write_config(repo, "misnamed", {"input": [{"name": "image", "dims": [4]}]})
    save(matmul_relu(1.0), os.path.join(repo, "badwarmup", "1", "model.onnx"))
    write_config(repo, "badwarmup", {"model_warmup": [{"inputs": {"x": {"dims": [1, 5]}}}]})
    s = Server(repo, os.path.join(repo, "strict.log"), wait=False)
    assert s.proc.wait(120) == 3
    s.stop()
    assert "preferred_batch_size" in open(os.path.join(repo, "strict.log")).read()
    s = Server(repo, os.path.join(repo, "lenient.log"), "--allow-failed-models")
    try:
        status, data, _ = s.request("POST", "/v2/repository/index", b"{}")
        states = {m["name"]: m for m in json.loads(data)}
        assert states["good"]["state"] == "READY" and states["bad"]["state"] == "UNAVAILABLE"
        assert "preferred_batch_size" in states["bad"]["reason"]
        assert "no input of that name (inputs: x)" in states["misnamed"]["reason"]
        assert "model_warmup[0]" in states["badwarmup"]["reason"] and "expected shape" in states["badwarmup"]["reason"]
        assert s.request("GET", "/v2/health/ready")[0] == 503
        assert s.request("POST", "/v2/models/bad/infer", b"{}")[0] == 503
    finally:
        assert s.stop() == 0


def test_sigterm_finishes_requests_in_flight(tmp_path):
    repo = str(tmp_path)
    save(slow_model(), os.path.join(repo, "slow", "1", "model.onnx"))
    s = Server(repo, os.path.join(repo, "server.log"))
    x = np.zeros((128, 384), np.float32)
    body, headers = binary_request({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                                "parameters": {"binary_data_size": x.nbytes}}]}, x.tobytes())
    statuses = []
    threads = [threading.Thread(target=lambda: statuses.append(s.request("POST", "/v2/models/slow/infer", body, headers)[0]))
               for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)  # the requests are queued or running
    assert s.stop() == 0
    for t in threads:
        t.join()
    assert statuses == [200] * 4, statuses
