#!/usr/bin/env python3
"""Runs a model with `kiln run` and with ONNX Runtime on the same seeded inputs and checks
that the outputs match: every element within atol 1e-5 + rtol 1e-4 * |expected|, or, where
float32 rounding alone is larger than that, kiln's largest error no larger than twice the
error between ONNX Runtime's own optimized and unoptimized runs (its noise floor), or, failing
both, kiln's largest error from an exact (float64) reference no larger than 4x ONNX Runtime's.
The exact reference is the model with every float tensor widened to float64, run by kiln's
reference interpreter (ONNX Runtime has no float64 Conv). The 4x allows for Winograd F(4x4,3x3),
which trades a few bits of rounding for 2-4x fewer FLOPs in 3x3 convs (as cuDNN and oneDNN do).
Usage: compare_ort.py KILN MODEL.onnx [--seed S]"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

NP_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64,
            onnx.TensorProto.INT32: np.int32, onnx.TensorProto.BOOL: np.bool_,
            onnx.TensorProto.DOUBLE: np.float64}
DEFAULT_DIMS = {"N": 1, "batch": 1, "seq": 128}


def make_inputs(model, rng):
    feeds = {}
    inits = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else DEFAULT_DIMS.get(d.dim_param, 1) for d in tt.shape.dim]
        dtype = NP_TYPES[tt.elem_type]
        if inp.name == "attention_mask":
            x = np.ones(shape, dtype)
            x[..., shape[-1] * 3 // 4:] = 0  # some padding, so masking is exercised
        elif dtype in (np.int64, np.int32):
            x = rng.integers(0, 1000, size=shape).astype(dtype)
        else:
            x = rng.standard_normal(shape).astype(dtype)
        feeds[inp.name] = x
    return feeds


def widened_to_f64(model):
    """The model with every float32 tensor, type and Cast target made float64; None when it has
    subgraphs (not handled)."""
    from onnx import numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    f32, f64 = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE
    widen = lambda t: t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for t in m.graph.initializer:
        if t.data_type == f32:
            widen(t)
    for v in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if v.type.tensor_type.elem_type == f32:
            v.type.tensor_type.elem_type = f64
    for n in m.graph.node:
        for attr in n.attribute:
            if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                return None
            if n.op_type == "Cast" and attr.name == "to" and attr.i == f32:
                attr.i = f64
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type == f32:
                widen(attr.t)
    return m


def exact_outputs(kiln, model, feeds, tmp):
    """Outputs of the float64-widened model through kiln's interpreter, or None."""
    wide = widened_to_f64(model)
    if wide is None:
        return None
    path = os.path.join(tmp, "f64.onnx")
    onnx.save(wide, path)
    args = [kiln, "run", path, "--engine", "interp", "--output-dir", os.path.join(tmp, "out64")]
    for name, x in feeds.items():
        p = os.path.join(tmp, name + ".f64.npy")
        np.save(p, x.astype(np.float64) if x.dtype == np.float32 else x)
        args += ["--input", p]
    if subprocess.run(args, capture_output=True, text=True).returncode != 0:
        return None
    return {name: np.load(os.path.join(tmp, "out64", re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".npy"))
            for name in [o.name for o in model.graph.output]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kiln")
    ap.add_argument("model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--engine", default="interp", choices=["interp", "compiled"])
    a = ap.parse_args()
    model = onnx.load(a.model)
    feeds = make_inputs(model, np.random.default_rng(a.seed))
    sess = ort.InferenceSession(a.model, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess0 = ort.InferenceSession(a.model, plain, providers=["CPUExecutionProvider"])
    noise = {n: float(np.abs(x.astype(np.float64) - want[n].astype(np.float64)).max()) if x.size else 0.0
             for n, x in zip([o.name for o in sess0.get_outputs()], sess0.run(None, feeds))}
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        args = [a.kiln, "run", a.model, "--engine", a.engine, "--output-dir", os.path.join(tmp, "out")]
        for name, x in feeds.items():
            p = os.path.join(tmp, name + ".npy")
            np.save(p, x)
            args += ["--input", p]
        t0 = time.perf_counter()
        r = subprocess.run(args, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            print(r.stdout + r.stderr)
            return 1
        exact = None  # the float64 reference, computed only when needed
        kiln_ms = re.search(r"^time: ([0-9.]+) ms", r.stdout, re.M).group(1)
        for name, w in want.items():
            stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
            g = np.load(os.path.join(tmp, "out", stem + ".npy"))
            err = np.abs(g.astype(np.float64) - w.astype(np.float64))
            tol = a.atol + a.rtol * np.abs(w.astype(np.float64))
            bad = int((err > tol).sum())
            max_err = float(err.max()) if err.size else 0.0
            within_noise = max_err <= 2 * noise[name]
            print(f"{os.path.basename(a.model)} output {name} {list(g.shape)}: max abs err {max_err:.3e}, "
                  f"{bad} elements outside rtol {a.rtol} / atol {a.atol}; onnxruntime's own noise floor "
                  f"(optimized vs unoptimized) {noise[name]:.3e}")
            within_exact = False
            if g.shape == w.shape and bad and not within_noise:
                if exact is None:
                    exact = exact_outputs(a.kiln, model, feeds, tmp) or {}
                if name in exact:
                    kiln_exact = float(np.abs(g.astype(np.float64) - exact[name]).max())
                    ort_exact = float(np.abs(w.astype(np.float64) - exact[name]).max())
                    within_exact = kiln_exact <= 4 * ort_exact
                    print(f"  from the exact (float64) result: kiln {kiln_exact:.3e}, onnxruntime {ort_exact:.3e}"
                          f" ({'within' if within_exact else 'over'} 4x)")
            ok &= g.shape == w.shape and (bad == 0 or within_noise or within_exact)
    print(f"kiln {a.engine} run: {kiln_ms} ms (process wall {wall:.1f} s): {'MATCH' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
