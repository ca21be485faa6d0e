"""kiln (both engines) against ONNX Runtime on ResNet-18 and the BERT-like encoder, through the
Python API. The models come from build/ (exported with Debian's PyTorch when missing)."""

import numpy as np
import pytest

import kiln
from conftest import assert_close_to_ort


@pytest.mark.parametrize("engine", ["compiled", "interp"])
def test_resnet18(resnet18_path, engine):
    sess = kiln.load(resnet18_path, engine=engine)
    assert [i.name for i in sess.inputs] == ["input"] and sess.inputs[0].shape == ("N", 3, 224, 224)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    out = sess.run({"input": x})
    assert out["logits"].shape == (1, 1000)
    assert_close_to_ort(resnet18_path, out, {"input": x})


def test_resnet18_batch2_threads(resnet18_path):
    sess = kiln.load(resnet18_path, threads=2)
    x = np.random.default_rng(1).standard_normal((2, 3, 224, 224)).astype(np.float32)
    assert_close_to_ort(resnet18_path, sess.run([x]), {"input": x})


def bert_feeds(seq=128):
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 1000, size=(1, seq)).astype(np.int64)
    mask = np.ones((1, seq), np.int64)
    mask[:, seq * 3 // 4:] = 0  # some padding, so masking is exercised
    return {"input_ids": ids, "attention_mask": mask}


def test_bert_like(bert_path):
    sess = kiln.load(bert_path)
    assert [o.name for o in sess.outputs] == ["last_hidden_state", "pooled"]
    assert sess.inputs[0].dtype == np.int64 and sess.inputs[0].shape == ("batch", "seq")
    feeds = bert_feeds()
    assert_close_to_ort(bert_path, sess.run(feeds), feeds)


def test_resnet18_four_threads_one_session(resnet18_path):
    import threading

    sess = kiln.load(resnet18_path, threads=1)
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((1, 3, 224, 224)).astype(np.float32) for _ in range(4)]
    serial = [sess.run([x])["logits"] for x in xs]
    got = [[None] * 2 for _ in xs]
    errors = []

    def worker(i):
        try:
            for rep in range(2):
                got[i][rep] = sess.run({"input": xs[i]})["logits"]
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(4):
        for rep in range(2):
            np.testing.assert_array_equal(got[i][rep], serial[i])


def test_run_releases_the_gil(resnet18_path):
    import threading

    sess = kiln.load(resnet18_path, engine="interp")
    x = np.zeros((1, 3, 224, 224), np.float32)
    worker = threading.Thread(target=lambda: [sess.run([x]) for _ in range(3)])
    ticks = 0
    worker.start()
    while worker.is_alive():
        ticks += 1  # only advances while run() does not hold the GIL
    worker.join()
    assert ticks > 10000, ticks
