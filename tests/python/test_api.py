"""The kiln Python API on small models: metadata, feeds, zero-copy rules, DLPack, errors,
threads, profile, inspect, optimize."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from conftest import make_mlp_model

ENGINES = ["compiled", "interp"]


def reference_mlp(model, x):
    from onnx import numpy_helper

    w = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    h = np.maximum(x @ w["W1"] + w["b1"], 0)
    return h @ w["W2"] + w["b2"]


def test_version():
    assert isinstance(kiln.__version__, str) and kiln.__version__.count(".") == 2


def test_not_imported_from_source_tree():
    # scripts/test_python_package.sh runs against the installed wheel, not python/kiln.
    if os.environ.get("KILN_TEST_INSTALLED") == "1":
        assert "site-packages" in kiln.__file__, kiln.__file__


@pytest.mark.parametrize("how", ["script", "module"])
def test_cli_entry_point(mlp_path, tmp_path, how):
    # The package carries the CLI (kiln/bin/kiln), run by the `kiln` console script and by
    # `python -m kiln`; only an installed package has the script.
    if os.environ.get("KILN_TEST_INSTALLED") != "1":
        pytest.skip("runs against the installed package (scripts/test_python_package.sh)")
    if how == "script":
        cmd = [os.path.join(os.path.dirname(sys.executable), "kiln")]
    else:
        cmd = [sys.executable, "-m", "kiln"]
    r = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "kiln " + kiln.__version__, r
    r = subprocess.run(cmd + ["run", mlp_path, "--dim", "N=2", "-o", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "y.npy").exists()
    r = subprocess.run(cmd + ["run", str(tmp_path / "missing.onnx")], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "missing.onnx" in r.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_run_dict_and_list(mlp_path, engine):
    model = make_mlp_model()
    sess = kiln.load(mlp_path, engine=engine)
    assert sess.engine == engine
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    want = reference_mlp(model, x)
    out = sess.run({"x": x})
    assert list(out) == ["y"]
    np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(sess.run([x])["y"], want, rtol=1e-5, atol=1e-5)
    # another batch size through the symbolic dim
    x5 = np.ones((5, 16), np.float32)
    np.testing.assert_allclose(sess.run([x5])["y"], reference_mlp(model, x5), rtol=1e-5, atol=1e-5)


def test_metadata(mlp_path):
    sess = kiln.load(mlp_path)
    (i,) = sess.inputs
    (o,) = sess.outputs
    assert (i.name, i.dtype, i.kiln_dtype, i.shape, i.kind) == ("x", np.dtype("float32"), "f32", ("N", 16), "tensor")
    assert (o.name, o.dtype, o.shape) == ("y", np.dtype("float32"), ("N", 8))
    assert "x: f32" in repr(sess)


def test_load_bytes(mlp_path):
    data = open(mlp_path, "rb").read()
    x = np.ones((2, 16), np.float32)
    want = kiln.load(mlp_path).run([x])["y"]
    for source in (data, bytearray(data), memoryview(data)):
        np.testing.assert_array_equal(kiln.load(source).run([x])["y"], want)


def test_load_pathlike(tmp_path):
    p = tmp_path / "m.onnx"
    make_mlp_model(p)
    assert kiln.load(p, engine="interp").inputs[0].name == "x"


def test_python_lists_are_converted(mlp_path):
    sess = kiln.load(mlp_path)
    x = [[0.5] * 16, [1.0] * 16]
    np.testing.assert_allclose(sess.run({"x": x})["y"], sess.run([np.array(x, np.float32)])["y"])


@pytest.mark.parametrize("engine", ENGINES)
def test_zero_copy_input(mlp_path, engine):
    sess = kiln.load(mlp_path, engine=engine)
    x = kiln.empty((4, 16), np.float32)
    assert x.ctypes.data % 64 == 0
    x[:] = 1.0
    sess.run({"x": x})
    assert sess.last_copied_inputs() == []
    strided = np.ones((4, 32), np.float32)[:, ::2]
    out = sess.run({"x": strided})
    assert sess.last_copied_inputs() == ["x"]
    np.testing.assert_allclose(out["y"], sess.run({"x": x})["y"])
    swapped = np.ones((4, 16), np.dtype(">f4"))
    np.testing.assert_allclose(sess.run({"x": swapped})["y"], out["y"])
    assert sess.last_copied_inputs() == ["x"]


@pytest.mark.parametrize("engine", ENGINES)
def test_outputs_own_kiln_memory(mlp_path, engine):
    sess = kiln.load(mlp_path, engine=engine)
    y = sess.run([np.ones((2, 16), np.float32)])["y"]
    assert isinstance(y.base, kiln.TensorOwner)
    assert y.base.address == y.ctypes.data and y.base.nbytes == y.nbytes
    assert y.flags.c_contiguous and y.flags.writeable
    y2 = sess.run([np.ones((2, 16), np.float32)])["y"]
    assert not np.shares_memory(y, y2)  # each run hands out fresh memory


def _identity_model(path, with_constant=False):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]
    inits = []
    if with_constant:
        inits.append(numpy_helper.from_array(np.arange(4, dtype=np.float32), "c"))
        nodes.append(helper.make_node("Identity", ["c"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [4]))
    g = helper.make_graph(nodes, "id", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])], outputs,
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


@pytest.mark.parametrize("engine", ENGINES)
def test_outputs_never_alias_inputs_or_constants(tmp_path, engine):
    p = tmp_path / "id.onnx"
    _identity_model(p, with_constant=True)
    sess = kiln.load(p, engine=engine, optimize=False)
    x = kiln.empty(4, np.float32)
    x[:] = 7
    out = sess.run({"x": x})
    assert not np.shares_memory(out["y"], x)
    del x
    np.testing.assert_array_equal(out["y"], [7, 7, 7, 7])
    out["z"][:] = -1  # must not change the model's constant
    np.testing.assert_array_equal(sess.run({"x": np.zeros(4, np.float32)})["z"], [0, 1, 2, 3])


def test_dlpack_round_trip(mlp_path):
    sess = kiln.load(mlp_path)
    y = sess.run([np.ones((2, 16), np.float32)])["y"]
    capsule = y.__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    assert y.__dlpack_device__() == (1, 0)  # kDLCPU
    z = np.from_dlpack(y)
    assert np.shares_memory(y, z)

    class Producer:
        """A DLPack-only producer (like a tensor of another framework)."""

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    x = kiln.empty((2, 16), np.float32)
    x[:] = 1
    out = sess.run({"x": Producer(x)})
    assert sess.last_copied_inputs() == []
    np.testing.assert_array_equal(out["y"], y)
    # kiln's own output goes back in through DLPack
    y16 = sess.run([Producer(np.ascontiguousarray(np.ones((2, 16), np.float32)))])["y"]
    np.testing.assert_array_equal(y16, y)


def test_bad_file(tmp_path, kiln_cli):
    missing = str(tmp_path / "missing.onnx")
    with pytest.raises(kiln.Error) as e:
        kiln.load(missing)
    assert "missing.onnx" in str(e.value)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"this is not an ONNX model")
    with pytest.raises(kiln.InvalidModelError) as e:
        kiln.load(garbage)
    assert isinstance(e.value, ValueError) and e.value.exit_code == 3
    assert str(e.value).startswith("invalid model")
    assert e.value.file == str(garbage)
    if kiln_cli:
        # The same text as the CLI prints after "kiln: ".
        r = subprocess.run([kiln_cli, "run", str(garbage)], capture_output=True, text=True)
        assert r.returncode == 3
        assert r.stderr.strip() == "kiln: " + str(e.value)
    with pytest.raises(kiln.InvalidModelError):
        kiln.load(b"\x00\x01garbage")
    assert kiln.BadModelError is kiln.InvalidModelError


def test_bad_feeds(mlp_path):
    sess = kiln.load(mlp_path)
    with pytest.raises(kiln.BadInputError, match="no input named 'nope'.*inputs: x"):
        sess.run({"nope": np.ones((1, 16), np.float32)})
    with pytest.raises(kiln.BadInputError, match="input 'x'.*was not given"):
        sess.run({})
    with pytest.raises(kiln.BadInputError, match="x") as e:
        sess.run({"x": np.ones((1, 15), np.float32)})  # wrong static dim
    assert "[1,15]" in str(e.value) and isinstance(e.value, ValueError) and e.value.exit_code == 4
    with pytest.raises(kiln.BadInputError, match="f64"):
        sess.run({"x": np.ones((1, 16), np.float64)})  # wrong dtype
    with pytest.raises(kiln.BadInputError, match="too many inputs"):
        sess.run([np.ones((1, 16), np.float32)] * 2)
    with pytest.raises(kiln.BadInputError, match="complex128"):
        sess.run([np.ones((1, 16), np.complex128)])
    with pytest.raises(kiln.UsageError):
        sess.run(42)


def test_usage_errors(mlp_path):
    with pytest.raises(kiln.UsageError, match="unknown engine 'gpu'") as e:
        kiln.load(mlp_path, engine="gpu")
    assert isinstance(e.value, ValueError) and e.value.exit_code == 2
    with pytest.raises(kiln.UsageError, match="threads"):
        kiln.load(mlp_path, threads=0)
    with pytest.raises(kiln.UsageError, match="profile=True"):
        kiln.load(mlp_path).profile()


def test_compile_shared_library(mlp_path, tmp_path):
    out = tmp_path / "mlp.so"
    try:
        r = kiln.compile(mlp_path, out, dims={"N": [1, 2, 5]})
    except kiln.UnsupportedError as e:  # a build without the AOT export, or an op it cannot export
        assert str(e).startswith("unsupported") and isinstance(e, NotImplementedError)
        return
    assert out.exists() and out.read_bytes()[:4] == b"\x7fELF"
    assert r["library_bytes"] > 0 and r["fallback_nodes"] == 0 and r["signatures"] == 3
    import ctypes

    lib = ctypes.CDLL(str(out))  # a loadable library with one plan per size of N
    model = ctypes.c_void_p()
    assert lib.kiln_model_load_embedded(None, ctypes.byref(model)) == 0
    lib.kiln_model_num_signatures.restype = ctypes.c_size_t
    assert lib.kiln_model_num_signatures(model) == 3
    lib.kiln_model_free(model)
    with pytest.raises(kiln.UsageError, match="no symbolic dim of that name"):
        kiln.compile(mlp_path, tmp_path / "bad.so", dims={"M": [1, 2]})
    # A whole input shape, and the compile run on real inputs: one signature each, theirs.
    for kwargs, rows in (({"shapes": {"x": [3, 16]}}, 3), ({"inputs": [np.ones((4, 16), np.float32)]}, 4)):
        so = tmp_path / f"one{rows}.so"  # (a path dlopen has seen would give the first library back)
        r = kiln.compile(mlp_path, so, **kwargs)
        assert r["signatures"] == 1
        lib = ctypes.CDLL(str(so))
        assert lib.kiln_model_load_embedded(None, ctypes.byref(model)) == 0
        info = (ctypes.c_char_p, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64))
        out = type("Info", (ctypes.Structure,), {"_fields_": [("name", info[0]), ("dtype", info[1]),
                                                              ("rank", info[2]), ("dims", info[3])]})()
        assert lib.kiln_model_input_info(model, ctypes.c_size_t(0), ctypes.byref(out)) == 0
        assert [out.dims[k] for k in range(out.rank)] == [rows, 16]
        lib.kiln_model_free(model)


@pytest.mark.parametrize("engine", ENGINES)
def test_profile(mlp_path, engine):
    sess = kiln.load(mlp_path, engine=engine, profile=True)
    sess.run([np.ones((2, 16), np.float32)])
    prof = sess.profile()
    assert prof and all(set(p) == {"node", "op", "ms"} and p["ms"] >= 0 for p in prof)


@pytest.mark.parametrize("engine", ENGINES)
def test_threads_share_one_session(mlp_path, engine):
    sess = kiln.load(mlp_path, engine=engine, threads=2)
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((b, 16)).astype(np.float32) for b in (1, 2, 3, 4, 5, 6, 7, 8)]
    serial = [sess.run([x])["y"] for x in xs]
    results = {}
    errors = []

    def worker(t):
        try:
            for rep in range(5):
                for i in range(t, len(xs), 4):
                    results[(t, rep, i)] = sess.run({"x": xs[i]})["y"]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(results) == 5 * len(xs)
    for (_, _, i), y in results.items():
        np.testing.assert_array_equal(y, serial[i])


def test_inspect_matches_cli(mlp_path, kiln_cli):
    info = kiln.inspect(mlp_path)
    assert info["inputs"] == [{"name": "x", "dtype": "f32", "shape": ["N", 16]}]
    assert info["op_histogram"] == {"Add": 2, "MatMul": 2, "Relu": 1}
    assert info["parameters"] == 16 * 32 + 32 + 32 * 8 + 8
    assert info["unsupported"] == []
    assert info["nodes_before"] == 5 and info["nodes_after"] >= 1
    if kiln_cli:
        import json

        r = subprocess.run([kiln_cli, "inspect", "--json", mlp_path], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        # The same facts; only the compile time differs between two compilations.
        cli = json.loads(r.stdout)
        assert cli.pop("compile_ms") >= 0 and info.pop("compile_ms") >= 0
        assert cli == info
        assert info["generated_nodes"] + info["microkernel_nodes"] >= 1 and info["fallback_nodes"] == 0
    plain = kiln.inspect(mlp_path, engine="interp")
    assert "generated_nodes" not in plain and plain["op_histogram"] == info["op_histogram"]
    compiled = kiln.inspect(mlp_path, engine="compiled", dims={"N": 4}, passes=True)
    assert compiled["dim_bindings"] == {"N": 4} and "kernels" in compiled and compiled["passes"]


def test_optimize(mlp_path, tmp_path):
    out = tmp_path / "opt.onnx"
    r = kiln.optimize(mlp_path, out)
    assert out.exists() and r["nodes_before"] == 5 and r["passes"]
    x = np.ones((2, 16), np.float32)
    np.testing.assert_allclose(kiln.load(out, engine="interp").run([x])["y"],
                               kiln.load(mlp_path, engine="interp").run([x])["y"], rtol=1e-5)
    with pytest.raises(kiln.UsageError, match="unknown pass 'nope'"):
        kiln.optimize(mlp_path, tmp_path / "x.onnx", passes=["nope"])


def _conv_model(path):
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((24, 16, 3, 3)) * 0.1).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 20, 20])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def test_tune_and_load_with_records(tmp_path, kiln_cli, monkeypatch):
    """kiln.tune (the packaged CLI when installed, else the build's) writes records that
    kiln.load(records=...) applies; its errors are kiln's exceptions."""
    if os.environ.get("KILN_TEST_INSTALLED") != "1":
        if not kiln_cli:
            pytest.skip("no kiln CLI to tune with")
        monkeypatch.setenv("KILN_CLI", kiln_cli)
    model, records = tmp_path / "conv.onnx", tmp_path / "r.jsonl"
    _conv_model(model)
    summary = kiln.tune(model, records, budget=15, threads=1, runs=2, progress=False, offload=False)
    assert summary["records"] == str(records) and summary["trials"] > 0 and summary["offload"] == ""
    assert [t["key"] for t in summary["tasks"]] == ["Conv f32 x1x16x20x20 w24x16x3x3 s1x1 d1x1 p1x1x1x1 g1"]
    assert '"status":"ok"' in records.read_text()
    x = np.random.default_rng(2).standard_normal((1, 16, 20, 20)).astype(np.float32)
    want = kiln.load(model, threads=1).run([x])["y"]
    got = kiln.load(model, threads=1, records=records).run([x])["y"]
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    with pytest.raises(kiln.UsageError, match="pass --resume"):
        kiln.tune(model, records, budget=1, progress=False)
    with pytest.raises(kiln.BadInputError, match="cannot open the tuning records"):
        kiln.load(model, records=tmp_path / "missing.jsonl")


def test_load_with_offload(tmp_path):
    """kiln.load(offload="dnnl") runs the model's conv on oneDNN, with the same results as
    kiln's own kernels; an unknown backend is a UsageError naming the available ones."""
    model = tmp_path / "conv.onnx"
    _conv_model(model)
    x = np.random.default_rng(3).standard_normal((1, 16, 20, 20)).astype(np.float32)
    want = kiln.load(model, threads=1).run([x])["y"]
    try:
        s = kiln.load(model, threads=2, offload="dnnl")
    except kiln.UsageError as e:
        assert "available" in str(e)
        pytest.skip("kiln built without oneDNN")
    got = s.run([x])["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    stats = s.plan_stats()
    assert stats["external_regions"] == 1 and stats["external_nodes"] == 1
    with pytest.raises(kiln.UsageError, match="no backend named 'nope'"):
        kiln.load(model, offload=["nope"])
