"""Shared fixtures of the kiln Python package tests: the repository's model files (exported
with Debian's PyTorch when missing, as tests/models/run_model_tests.sh does), small models built
with onnx.helper, and an output comparison against ONNX Runtime.

Run through scripts/test_python_package.sh (a clean virtualenv with `pip install .`), or with
any interpreter where `import kiln` works.
"""

import os
import subprocess

import numpy as np
import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TORCH_PYTHON = "/usr/bin/python3"  # Debian's python3-torch / python3-torchvision
LIBONNX_NODE = "/usr/share/libonnx-testdata/data/node"


def _torch_available():
    if not os.path.exists(TORCH_PYTHON):
        return False
    r = subprocess.run([TORCH_PYTHON, "-c", "import torch, torchvision"], capture_output=True)
    return r.returncode == 0


def _model(path, export_cmd):
    """Returns `path`, exporting it first with `export_cmd` when it is missing."""
    if os.path.exists(path):
        return path
    if not _torch_available():
        pytest.skip(f"{path} is missing and Debian's python3-torch/python3-torchvision are not installed "
                    "to export it")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    r = subprocess.run(export_cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(path):
        pytest.fail(f"exporting {path} failed:\n{r.stdout}\n{r.stderr}")
    return path


@pytest.fixture(scope="session")
def resnet18_path():
    out = os.path.join(REPO, "build", "bench-models")
    return _model(os.path.join(out, "resnet18.onnx"),
                  [TORCH_PYTHON, os.path.join(REPO, "bench", "export_models.py"), out, "resnet18"])


@pytest.fixture(scope="session")
def bert_path():
    out = os.path.join(REPO, "build", "models")
    return _model(os.path.join(out, "bert_like.onnx"),
                  [TORCH_PYTHON, os.path.join(REPO, "tests", "models", "export_models.py"), out, "bert_like"])


@pytest.fixture(scope="session")
def kiln_cli():
    """The kiln CLI of a build tree, for comparing error messages (None when not built)."""
    for preset in ("release", "lead", "py-dev"):
        p = os.path.join(REPO, "build", preset, "tools", "kiln", "kiln")
        if os.access(p, os.X_OK):
            return p
    return None


def make_mlp_model(path=None, batch="N", width=16, seed=0):
    """y = Relu(x @ W1 + b1) @ W2 + b2 with x: f32[batch, width]; returns the ModelProto
    (saved to `path` when given)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array(rng.standard_normal((width, 32)).astype(np.float32), "W1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "W2")
    b2 = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b2")
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h0"], name="mm1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="add1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "W2"], ["h3"], name="mm2"),
        helper.make_node("Add", ["h3", "b2"], ["y"], name="add2"),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 8])],
        initializer=[w1, b1, w2, b2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    if path:
        onnx.save(model, str(path))
    return model


@pytest.fixture
def mlp_path(tmp_path):
    p = tmp_path / "mlp.onnx"
    make_mlp_model(p)
    return str(p)


def ort_outputs(path, feeds, optimized=True):
    import onnxruntime as ort

    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def assert_close_to_ort(path, got, feeds, rtol=1e-4, atol=1e-5):
    """As tests/models/compare_ort.py: every element within atol + rtol * |expected|, or, where
    float32 rounding alone exceeds that, the largest error within twice ONNX Runtime's own
    noise floor (its optimized vs unoptimized runs)."""
    want = ort_outputs(path, feeds)
    noise = None
    assert set(got) == set(want), f"outputs {sorted(got)} != onnxruntime's {sorted(want)}"
    for name, w in want.items():
        g = got[name]
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        err = np.abs(g.astype(np.float64) - w.astype(np.float64))
        if (err <= atol + rtol * np.abs(w.astype(np.float64))).all():
            continue
        if noise is None:
            plain = ort_outputs(path, feeds, optimized=False)
            noise = {n: float(np.abs(plain[n].astype(np.float64) - want[n].astype(np.float64)).max()) for n in want}
        assert err.max() <= 2 * noise[name], (
            f"{name}: max abs err {err.max():.3e} exceeds rtol {rtol}/atol {atol} and twice onnxruntime's "
            f"noise floor {noise[name]:.3e}")
