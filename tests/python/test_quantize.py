"""kiln.quantize: static QDQ quantization from in-memory and folder samples, the report, dynamic
quantization, errors; the quantized models run in ONNX Runtime and agree with kiln's run of
them (ONNX Runtime without graph optimizations: its Q/DQ semantics exactly, no int8 kernels)."""
import json
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln


def conv_model(path, opset=13):
    """Conv -> Relu -> MaxPool -> Conv(+bias) -> Add(residual) -> GlobalAveragePool -> Gemm."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    w2 = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.1
    b2 = rng.standard_normal(8).astype(np.float32) * 0.1
    fc = rng.standard_normal((4, 8)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Add", ["c2", "p1"], ["a"], name="residual"),
        helper.make_node("GlobalAveragePool", ["a"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2"),
         numpy_helper.from_array(fc, "fc")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def samples(n, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (1, 3, 16, 16)).astype(np.float32) for _ in range(n)]


def ort_exact(path, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def sqnr(a, b):
    return 10 * np.log10((a ** 2).sum() / ((a - b) ** 2).sum())


@pytest.mark.parametrize("method", ["minmax", "entropy", "percentile"])
def test_static_quantization_runs_everywhere(tmp_path, method):
    model = conv_model(str(tmp_path / "net.onnx"))
    out = str(tmp_path / "q.onnx")
    calib = samples(8)
    r = kiln.quantize(model, out, calib, method=method, report=str(tmp_path / "r.json"))
    assert r["quantized_weights"] == 3 and r["quantized_biases"] == 1
    # x and p1 (read by the Convs, the residual Add), r1 (pooled into p1), c2 (Add), f (Gemm).
    names = {t["name"] for t in r["tensors"]}
    assert {"x", "r1", "p1", "c2", "f"} <= names and "c1" not in names and "y" not in names
    ops = [n.op_type for n in onnx.load(out).graph.node]
    assert ops.count("QuantizeLinear") == len(names) and "DequantizeLinear" in ops
    x = samples(1, seed=7)[0]
    float_y = kiln.load(model).run({"x": x})["y"]
    y = kiln.load(out, engine="compiled").run({"x": x})["y"]
    np.testing.assert_allclose(y, ort_exact(out, {"x": x})[0], rtol=1e-3, atol=2e-3)
    assert sqnr(float_y, y) > 20
    report = json.load(open(tmp_path / "r.json"))
    sq = [t["sqnr_db"] for t in report["tensors"] if t["sqnr_db"] is not None]
    assert sq == sorted(sq) and report["outputs"][0]["name"] == "y"


def test_entropy_and_percentile_clip_outliers(tmp_path):
    model = conv_model(str(tmp_path / "net.onnx"))
    calib = samples(4)
    calib[0][0, 0, 0, 0] = 40.0  # one outlier pixel
    ranges = {}
    for method in ("minmax", "percentile", "entropy"):
        r = kiln.quantize(model, str(tmp_path / f"{method}.onnx"), calib, method=method, percentile=99.9)
        ranges[method] = {t["name"]: t["range"] for t in r["tensors"]}
    assert ranges["minmax"]["x"][1] == pytest.approx(40.0)
    assert ranges["percentile"]["x"][1] < 2 and ranges["entropy"]["x"][1] < 10


def test_folder_samples_s8_per_tensor_and_exclude(tmp_path):
    model = conv_model(str(tmp_path / "net.onnx"))
    folder = tmp_path / "calib"
    folder.mkdir()
    for i, s in enumerate(samples(3)):
        np.save(folder / f"{i}.npy", s)
    out = str(tmp_path / "q.onnx")
    r = kiln.quantize(model, out, str(folder), activation_type="s8", per_channel=False, exclude=["fc", "Add"])
    assert r["samples"] == 3 and r["quantized_weights"] == 2
    m = onnx.load(out)
    for n in m.graph.node:
        if n.op_type == "DequantizeLinear":
            assert not any(a.name == "axis" for a in n.attribute)
    q_types = {m.graph.initializer[i].data_type for i in range(len(m.graph.initializer))
               if "_zero_point" in m.graph.initializer[i].name}
    assert TensorProto.INT8 in q_types and TensorProto.UINT8 not in q_types
    assert [n for n in m.graph.node if n.name == "fc"][0].input[1] == "fc"  # excluded: float weight
    ort_exact(out, {"x": samples(1)[0]})


def test_opset12_model_is_upgraded_for_per_channel_weights(tmp_path):
    model = conv_model(str(tmp_path / "net.onnx"), opset=12)
    r = kiln.quantize(model, str(tmp_path / "q.onnx"), samples(2))
    assert any("opset 12 to 13" in n for n in r["notes"])
    assert onnx.load(str(tmp_path / "q.onnx")).opset_import[0].version == 13


def test_dynamic_quantization(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])], [numpy_helper.from_array(w, "w")])
    model = str(tmp_path / "mm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), model)
    out = str(tmp_path / "dq.onnx")
    r = kiln.quantize(model, out, dynamic=True, reduce_range=True)
    assert r["dynamic_nodes"] == 1
    ops = [n.op_type for n in onnx.load(out).graph.node]
    assert "DynamicQuantizeLinear" in ops and "MatMulInteger" in ops and "MatMul" not in ops
    x = rng.standard_normal((3, 16)).astype(np.float32)
    y = kiln.load(out).run({"x": x})["y"]
    ref = np.maximum(x @ w, 0)
    assert sqnr(ref, y) > 30
    np.testing.assert_allclose(y, ort.InferenceSession(out, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)


def test_errors(tmp_path):
    model = conv_model(str(tmp_path / "net.onnx"))
    with pytest.raises(kiln.UsageError, match="calibration samples"):
        kiln.quantize(model, str(tmp_path / "q.onnx"))
    with pytest.raises(kiln.UsageError, match="minmax, entropy or percentile"):
        kiln.quantize(model, str(tmp_path / "q.onnx"), samples(1), method="kl")
    with pytest.raises(kiln.BadInputError):
        kiln.quantize(model, str(tmp_path / "q.onnx"), [np.zeros((1, 3, 8, 8), np.float32)])
    old = conv_model(str(tmp_path / "old.onnx"), opset=9)
    with pytest.raises(kiln.UnsupportedError, match="opset 9"):
        kiln.quantize(old, str(tmp_path / "q.onnx"), samples(1))
    folder = tmp_path / "imgs"
    folder.mkdir()
    (folder / "a.png").write_bytes(b"not an image")
    with pytest.raises(kiln.UsageError, match="calibration-preprocess"):
        kiln.quantize(model, str(tmp_path / "q.onnx"), str(folder))
    with pytest.raises(kiln.BadInputError, match="a.png"):
        kiln.quantize(model, str(tmp_path / "q.onnx"), str(folder), calibration_preprocess="imagenet")
    assert not os.path.exists(tmp_path / "q.onnx")


def test_image_samples(tmp_path):
    model = conv_model(str(tmp_path / "net.onnx"))
    folder = tmp_path / "imgs"
    folder.mkdir()
    rng = np.random.default_rng(3)
    for i in range(2):  # binary PPM (P6), 20x24 RGB
        pixels = rng.integers(0, 256, (20, 24, 3), dtype=np.uint8)
        (folder / f"{i}.ppm").write_bytes(b"P6\n24 20\n255\n" + pixels.tobytes())
    r = kiln.quantize(model, str(tmp_path / "q.onnx"), str(folder), calibration_preprocess="unit")
    x_range = [t["range"] for t in r["tensors"] if t["name"] == "x"][0]
    assert 0 <= x_range[0] and x_range[1] <= 1.0  # resized to 16x16 and scaled to [0, 1]


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_models_quantized_by_onnxruntime_run(tmp_path, fmt):
    """Pre-quantized models from ONNX Runtime's quantizer (QDQ, and QOperator with its
    com.microsoft QLinearAdd / QLinearGlobalAveragePool / QGemm) run on both engines and agree
    with ONNX Runtime's run of them within a quantization step of the output."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    model = conv_model(str(tmp_path / "net.onnx"))
    out = str(tmp_path / "ort_q.onnx")

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": s} for s in samples(4)])

        def get_next(self):
            return next(self.it, None)

    quantization.quantize_static(model, out, Reader(), quant_format=getattr(quantization.QuantFormat, fmt))
    ops = {(n.domain, n.op_type) for n in onnx.load(out).graph.node}
    if fmt == "QOperator":
        assert ("", "QLinearConv") in ops and ("com.microsoft", "QLinearAdd") in ops
    x = samples(1, seed=9)[0]
    want = ort_exact(out, {"x": x})[0]
    step = float(np.abs(want).max()) / 64  # a few output quantization steps
    for engine in ("interp", "compiled"):
        got = kiln.load(out, engine=engine).run({"x": x})["y"]
        np.testing.assert_allclose(got, want, atol=step, err_msg=engine)
