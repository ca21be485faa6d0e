#!/usr/bin/env python3
"""kiln's main demo: text recognition (PP-OCRv4, trained weights from the rapidocr-onnxruntime
wheel on PyPI, Apache-2.0) on bundled text-line images. Runs the model with `kiln run`, decodes
the text, and checks kiln's output against ONNX Runtime on the same input."""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, "demo", "cache")
MODEL = os.path.join(CACHE, "ch_PP-OCRv4_rec_infer.onnx")
WHEEL = "rapidocr-onnxruntime==1.4.4"


def fetch_model():
    """Copies the recognition model out of the PyPI wheel (downloaded once into demo/cache)."""
    if os.path.exists(MODEL):
        return
    os.makedirs(CACHE, exist_ok=True)
    wheels = glob.glob(os.path.join(CACHE, "rapidocr_onnxruntime-*.whl"))
    if not wheels:
        print(f"downloading {WHEEL} (for its trained OCR model) ...", flush=True)
        subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", CACHE, WHEEL])
        wheels = glob.glob(os.path.join(CACHE, "rapidocr_onnxruntime-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        with z.open("rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx") as src, open(MODEL, "wb") as dst:
            dst.write(src.read())


def read_pgm(path):
    with open(path, "rb") as f:
        data = f.read()
    m = re.match(rb"P5\s+(\d+)\s+(\d+)\s+(\d+)\s", data)
    if not m:
        raise ValueError(f"{path}: not a binary PGM")
    w, h = int(m.group(1)), int(m.group(2))
    return np.frombuffer(data[m.end():m.end() + w * h], dtype=np.uint8).reshape(h, w)


def preprocess(gray):
    """PaddleOCR recognition input: 3x48xW, scaled to [-1, 1]."""
    x = (gray.astype(np.float32) / 255.0 - 0.5) / 0.5
    return np.ascontiguousarray(np.broadcast_to(x, (1, 3) + x.shape), dtype=np.float32)


def ctc_decode(probs, charset):
    ids = probs.argmax(axis=-1)[0]
    conf = probs.max(axis=-1)[0]
    text, scores, prev = [], [], 0
    for i, c in zip(ids, conf):
        if i != 0 and i != prev:
            text.append(charset[i])
            scores.append(c)
        prev = i
    return "".join(text), float(np.mean(scores)) if scores else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--kiln", default=os.path.join(ROOT, "build", "release", "tools", "kiln", "kiln"))
    ap.add_argument("--images", nargs="*", default=sorted(glob.glob(os.path.join(ROOT, "demo", "images", "*.pgm"))))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    fetch_model()
    import onnx
    import onnxruntime as ort

    meta = {p.key: p.value for p in onnx.load(MODEL, load_external_data=False).metadata_props}
    charset = ["<blank>"] + meta["character"].splitlines() + [" "]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1  # kiln runs on one thread here: compare like with like
    sess = ort.InferenceSession(MODEL, so, providers=["CPUExecutionProvider"])
    print(f"model: {os.path.relpath(MODEL, ROOT)} (PP-OCRv4 text recognition, {len(charset)} classes)")
    worst = 0.0
    all_agree = True
    with tempfile.TemporaryDirectory() as tmp:
        for path in args.images:
            x = preprocess(read_pgm(path))
            inp = os.path.join(tmp, "x.npy")
            np.save(inp, x)
            out_dir = os.path.join(tmp, "out")
            run = subprocess.run([args.kiln, "run", MODEL, "--engine", "compiled", "--optimize", "--input", inp,
                                  "--output-dir", out_dir, "--repeat", str(args.repeat)],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                sys.stderr.write(run.stderr)
                return run.returncode
            kiln_ms = float(re.search(r"^time: ([0-9.]+) ms", run.stdout, re.M).group(1))
            out_name = sess.get_outputs()[0].name
            got = np.load(glob.glob(os.path.join(out_dir, "*.npy"))[0])
            feed = {sess.get_inputs()[0].name: x}
            want = sess.run([out_name], feed)[0]  # warm-up
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                want = sess.run([out_name], feed)[0]
                times.append((time.perf_counter() - t0) * 1000)
            ort_ms = float(np.median(times))
            text, score = ctc_decode(got, charset)
            ort_text, _ = ctc_decode(want, charset)
            diff = float(np.abs(got - want).max())
            worst = max(worst, diff)
            # The tolerance of kiln bench and the real-model tests: float32 sums in another order
            # (vectorized reductions, GEMM blocking) differ from ORT's by a few ulps.
            agree = text == ort_text and np.allclose(got, want, rtol=1e-3, atol=1e-4)
            all_agree &= agree
            print(f"\n{os.path.relpath(path, ROOT)}  ({x.shape[3]}x{x.shape[2]} px)")
            print(f"  text:        \"{text.strip()}\"  (confidence {score:.3f})")
            print(f"  kiln:        {kiln_ms:.1f} ms (compiled engine, median of {args.repeat} runs, the first compiles)   onnxruntime: {ort_ms:.1f} ms (1 thread)")
            print(f"  agreement:   {'yes' if agree else 'NO'}  (max |kiln - onnxruntime| = {diff:.2e}, same text: {text == ort_text})")
    print(f"\n{'all outputs agree with ONNX Runtime' if all_agree else 'MISMATCH against ONNX Runtime'} "
          f"(max abs difference {worst:.2e})")
    return 0 if all_agree else 1


if __name__ == "__main__":
    sys.exit(main())
