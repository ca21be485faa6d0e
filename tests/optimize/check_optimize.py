#!/usr/bin/env python3
"""Checks `kiln optimize` end to end: for each model, optimize it, run the ONNX checker on the
result (full_check=True), run the original and the optimized model in onnxruntime on the same
inputs (onnxruntime's graph optimizations off, so that each graph runs as written) and compare
the outputs (rtol 1e-3, atol 1e-5; NaN equals NaN; non-floats exact).

Models: ONNX files, backend-test case folders (model.onnx + test_data_set_0/input_*.pb, whose
inputs are used), or folders holding either. Other inputs are seeded random values for static
shapes, with symbolic dims bound to 1 (128 for sequence-like names: seq, sequence, len, ...).

Prints one line per failure (and per skip, with its reason), then `N passed, M failed, K skipped`.
Exit 0 when nothing failed. Skips are cases onnxruntime cannot run even before kiln touches them.

Usage: check_optimize.py --kiln KILN [--expected FILE --root DIR [--prefix node/]]
                         [--passes LIST] [--disable LIST] [-v] [MODEL_OR_DIR ...]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnx.checker
import onnx.numpy_helper
import onnxruntime as ort

RTOL, ATOL = 1e-3, 1e-5
SEQ_NAMES = re.compile(r"seq|len|token|time|step", re.IGNORECASE)


def collect(paths):
    """(display name, model path, case dir or None) for every model under `paths`."""
    out = []
    for p in paths:
        if os.path.isfile(p):
            out.append((p, p, None))
        elif os.path.isfile(os.path.join(p, "model.onnx")):
            out.append((os.path.basename(os.path.normpath(p)), os.path.join(p, "model.onnx"), p))
        elif os.path.isdir(p):
            for e in sorted(os.listdir(p)):
                q = os.path.join(p, e)
                if os.path.isfile(os.path.join(q, "model.onnx")) or (os.path.isfile(q) and e.endswith(".onnx")):
                    out.extend(collect([q]))
        else:
            print(f"FAIL {p}: no such file or folder")
            out.append((p, None, None))
    return out


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def read_pb(path, type_proto):
    with open(path, "rb") as f:
        data = f.read()
    which = type_proto.WhichOneof("value")
    if which == "sequence_type":
        s = onnx.SequenceProto()
        s.ParseFromString(data)
        return s.name, onnx.numpy_helper.to_list(s)
    if which == "optional_type":
        o = onnx.OptionalProto()
        o.ParseFromString(data)
        return o.name, onnx.numpy_helper.to_optional(o)
    t = onnx.TensorProto()
    t.ParseFromString(data)
    return t.name, onnx.numpy_helper.to_array(t)


def case_inputs(model, case_dir):
    ins = graph_inputs(model)
    by_name = {i.name: i for i in model.graph.input}
    ds = os.path.join(case_dir, "test_data_set_0")
    files = sorted((f for f in os.listdir(ds) if f.startswith("input_") and f.endswith(".pb")),
                   key=lambda f: int(f[len("input_"):-3]))
    feeds = {}
    for k, f in enumerate(files):
        pos = ins[k] if k < len(ins) else None
        # Read with the positional type first; the embedded name may pick another input.
        name, value = read_pb(os.path.join(ds, f), pos.type if pos is not None else onnx.TypeProto())
        if name and name in by_name and (pos is None or name != pos.name):
            name, value = read_pb(os.path.join(ds, f), by_name[name].type)
        feeds[name if name in by_name else pos.name] = value
    return feeds


def random_inputs(model, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in graph_inputs(model):
        if i.type.WhichOneof("value") != "tensor_type":
            raise RuntimeError(f"input '{i.name}' is not a tensor; random inputs need tensors")
        tt = i.type.tensor_type
        dims = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                dims.append(d.dim_value)
            else:
                dims.append(128 if SEQ_NAMES.search(d.dim_param or "") else 1)
        dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dt, np.floating):
            v = rng.standard_normal(dims).astype(dt)
        elif dt == np.bool_:
            v = rng.integers(0, 2, dims).astype(np.bool_)
        elif np.issubdtype(dt, np.integer):
            v = rng.integers(0, 10, dims).astype(dt)
        elif dt == np.object_:
            v = np.array(["kiln"] * int(np.prod(dims)), dtype=object).reshape(dims)
        else:
            raise RuntimeError(f"input '{i.name}': no random values for {dt}")
        feeds[i.name] = v
    return feeds


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 4
    # onnxruntime's own fusions would compute the original and the optimized graph differently
    # (a rewritten pattern no longer matches them): off, both sides run as written.
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def compare(a, b, where):
    """None when equal within tolerance, else a message."""
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)):
            return f"{where}: sequence vs non-sequence"
        if len(a) != len(b):
            return f"{where}: sequence length {len(b)} != {len(a)}"
        for k, (x, y) in enumerate(zip(a, b)):
            m = compare(x, y, f"{where}[{k}]")
            if m:
                return m
        return None
    if a is None or b is None:
        return None if a is None and b is None else f"{where}: one output is empty (None)"
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return f"{where}: shape {b.shape} != {a.shape}"
    if a.dtype != b.dtype:
        return f"{where}: dtype {b.dtype} != {a.dtype}"
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.complexfloating):
        af, bf = a.astype(np.float64), b.astype(np.float64)
        ok = np.isclose(bf, af, rtol=RTOL, atol=ATOL, equal_nan=True)
        if not ok.all():
            diff = np.abs(af - bf)
            diff[~np.isfinite(diff)] = np.inf
            return f"{where}: {int((~ok).sum())} of {a.size} values differ (max |diff| {np.nanmax(diff):.3g})"
        return None
    if not np.array_equal(a, b):
        return f"{where}: {int((a != b).sum())} of {a.size} values differ"
    return None


def check_one(kiln, name, model_path, case_dir, outdir, passes, disable, timeout):
    """('pass'|'fail'|'skip', message)."""
    out = os.path.join(outdir, re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".opt.onnx")
    cmd = [kiln, "optimize", model_path, "-o", out]
    if passes:
        cmd += ["--passes", passes]
    if disable:
        cmd += ["--disable", disable]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "fail", f"kiln optimize timed out after {timeout} s"
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
        return "fail", f"kiln optimize exited {r.returncode}: {last}"
    try:
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001 - every checker error is a failure...
        msg = str(e).strip().splitlines()[0][:300]
        try:  # ...unless the original fails the same way (onnx's own function bodies, e.g. MVN)
            onnx.checker.check_model(model_path, full_check=True)
            return "fail", "onnx.checker: " + msg
        except Exception:  # noqa: BLE001
            try:
                onnx.checker.check_model(out, full_check=False)
            except Exception as e2:  # noqa: BLE001
                return "fail", "onnx.checker: " + str(e2).strip().splitlines()[0][:300]
            print(f"NOTE {name}: the original fails full_check too ({msg[:120]}); checked without it")
    original = onnx.load(model_path, load_external_data=False)
    try:
        feeds = case_inputs(original, case_dir) if case_dir else random_inputs(original)
    except Exception as e:  # noqa: BLE001
        return "skip", f"cannot make inputs: {e}"
    try:
        ref_sess = session(model_path)
        ref = ref_sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001
        return "skip", "onnxruntime cannot run the original: " + str(e).strip().splitlines()[0][:200]
    try:
        got = session(out).run(None, feeds)
    except Exception as e:  # noqa: BLE001
        return "fail", "onnxruntime cannot run the optimized model: " + str(e).strip().splitlines()[0][:300]
    names = [o.name for o in ref_sess.get_outputs()]
    if len(got) != len(ref):
        return "fail", f"{len(got)} outputs, expected {len(ref)}"
    for k, (a, b) in enumerate(zip(ref, got)):
        m = compare(a, b, f"output {k} '{names[k]}'")
        if m:
            return "fail", m
    return "pass", ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True, help="the kiln executable")
    ap.add_argument("--expected", help="list of case names (e.g. node/test_abs) to include")
    ap.add_argument("--root", help="folder the --expected names are relative to")
    ap.add_argument("--prefix", default="", help="only --expected names starting with this")
    ap.add_argument("--passes", default="", help="passed to kiln optimize --passes")
    ap.add_argument("--disable", default="", help="passed to kiln optimize --disable")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per kiln optimize run")
    ap.add_argument("-v", action="store_true", help="also print passing models")
    ap.add_argument("paths", nargs="*")
    a = ap.parse_args()

    paths = []
    if a.expected:
        if not a.root:
            ap.error("--expected needs --root")
        with open(a.expected) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and line.startswith(a.prefix):
                    paths.append(os.path.join(a.root, line))
    paths += a.paths
    models = collect(paths)
    ort.set_default_logger_severity(4)
    passed = failed = skipped = 0
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="kiln_optimize_") as outdir:
        for name, model_path, case_dir in models:
            if model_path is None:
                failed += 1
                continue
            try:
                status, msg = check_one(a.kiln, name, model_path, case_dir, outdir, a.passes, a.disable, a.timeout)
            except Exception as e:  # noqa: BLE001 - a bug in one case must not stop the run
                status, msg = "fail", f"check_optimize.py: {type(e).__name__}: {e}"
            for f in os.listdir(outdir):  # keep the disk use of big models bounded
                os.remove(os.path.join(outdir, f))
            if status == "pass":
                passed += 1
                if a.v:
                    print(f"PASS {name}")
            elif status == "skip":
                skipped += 1
                print(f"SKIP {name}: {msg}")
            else:
                failed += 1
                print(f"FAIL {name}: {msg}")
            sys.stdout.flush()
    print(f"{passed} passed, {failed} failed, {skipped} skipped ({time.time() - start:.0f} s)")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
