"""Run control from Python: Session.cancel() from another thread, run(..., timeout=...), and
kiln.load(..., max_memory=...); the session stays usable after each."""

import threading
import time

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln

N, CHAIN = 384, 48


def chain_model_bytes():
    """y = x·w·…·w (48 MatMuls of 384x384): long enough to cancel mid-way."""
    t = [N, N]
    nodes, prev = [], "x"
    for i in range(CHAIN):
        out = "y" if i == CHAIN - 1 else f"m{i}"
        nodes.append(helper.make_node("MatMul", [prev, "w"], [out]))
        prev = out
    g = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, t), helper.make_tensor_value_info("w", TensorProto.FLOAT, t)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, t)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def feeds():
    rng = np.random.default_rng(3)
    return {"x": rng.random((N, N), np.float32), "w": (rng.random((N, N), np.float32) / N).astype(np.float32)}


@pytest.mark.parametrize("engine", ["compiled", "interp"])
def test_cancel_from_another_thread(engine):
    sess = kiln.load(chain_model_bytes(), engine=engine, threads=1)
    f = feeds()
    want = sess.run(f)["y"]
    sess.cancel()  # no run in progress: later runs are not affected
    np.testing.assert_array_equal(sess.run(f)["y"], want)
    cancelled = False
    for _ in range(5):  # the cancel may come before the run starts on a very busy machine
        errors = []

        def run():
            try:
                sess.run(f)
            except kiln.CancelledError as e:
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(0.015)
        sess.cancel()
        t.join()
        if errors:
            cancelled = True
            assert errors[0].exit_code == 5 and "cancelled" in str(errors[0])
            assert isinstance(errors[0], RuntimeError)
            break
    assert cancelled
    np.testing.assert_array_equal(sess.run(f)["y"], want)


def test_timeout():
    sess = kiln.load(chain_model_bytes(), threads=1)
    f = feeds()
    with pytest.raises(kiln.RunTimeoutError, match="timeout of 0.001 s") as e:
        sess.run(f, timeout=0.001)
    assert isinstance(e.value, TimeoutError)
    assert sess.run(f, timeout=60)["y"].shape == (N, N)
    with pytest.raises(kiln.UsageError):
        sess.run(f, timeout=0)


def test_max_memory():
    with pytest.raises(kiln.ResourceLimitError, match="more than the memory limit") as e:
        kiln.load(chain_model_bytes(), max_memory=1 << 20).run(feeds())  # the output alone is 576 KiB, the arena more
    assert isinstance(e.value, MemoryError)
    assert kiln.load(chain_model_bytes(), max_memory="64M").run(feeds())["y"].shape == (N, N)
    with pytest.raises(kiln.UsageError, match="not a size"):
        kiln.load(chain_model_bytes(), max_memory="lots")
