#!/usr/bin/env python3
"""Times a model through kiln's C API (libkiln.so: what C and other-language users run) and
through ONNX Runtime in the same process, alternating in rounds like `kiln bench --compare`.

  bench/capi_timing.py MODEL.onnx [--lib build/release/lib/libkiln.so] [--threads N]
                       [--rounds 8] [--runs 5] [--dim NAME=VALUE ...]

Symbolic input dims: --dim, else 128 for sequence-like names (seq, sequence, length, ...), else
1 (as `kiln bench` picks them). Integer inputs get values in [0, 100); attention masks ones.
Prints per engine the median and min over all timed runs (ms) and kiln/ORT ratios.
"""
import argparse
import ctypes
import pathlib
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_RANK = 8
DTYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}


class Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int32), ("dims", ctypes.c_int64 * MAX_RANK),
                ("data", ctypes.c_void_p), ("size_bytes", ctypes.c_size_t)]


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("dims", ctypes.POINTER(ctypes.c_int64))]


class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("threads", ctypes.c_int32), ("pack_weights_at_load", ctypes.c_int32)]


def dim_for(name, dims_arg):
    if name in dims_arg:
        return dims_arg[name]
    return 128 if any(k in name.lower() for k in ("seq", "len", "token", "time")) else 1


def make_inputs(model_path, dims_arg):
    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else dim_for(str(d), dims_arg) for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        elif "mask" in i.name:
            feeds[i.name] = np.ones(shape, dtype=np.int64 if "int64" in i.type else np.int32)
        else:
            feeds[i.name] = rng.integers(0, 100, shape).astype(np.int64 if "int64" in i.type else np.int32)
    return feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("--lib", default=ROOT / "build/release/lib/libkiln.so")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5, help="timed runs per engine per round")
    ap.add_argument("--dim", action="append", default=[], help="NAME=VALUE for a symbolic input dim")
    a = ap.parse_args()
    dims_arg = {k: int(v) for k, v in (d.split("=", 1) for d in a.dim)}
    lib = ctypes.CDLL(str(a.lib))
    lib.kiln_last_error.restype = ctypes.c_char_p
    feeds = make_inputs(a.model, dims_arg)

    model = ctypes.c_void_p()
    opts = Options(ctypes.sizeof(Options), a.threads, 0)
    t0 = time.perf_counter()
    if lib.kiln_model_load_file(str(a.model).encode(), ctypes.byref(opts), ctypes.byref(model)) != 0:
        sys.exit(f"kiln_model_load_file: {lib.kiln_last_error().decode()}")
    load_ms = (time.perf_counter() - t0) * 1e3
    n_in, n_out = lib.kiln_model_num_inputs(model), lib.kiln_model_num_outputs(model)
    ins = (Tensor * n_in)()
    for k in range(n_in):
        info = TensorInfo()
        lib.kiln_model_input_info(model, ctypes.c_size_t(k), ctypes.byref(info))
        x = np.ascontiguousarray(feeds[info.name.decode()])
        ins[k].dtype, ins[k].rank = info.dtype, x.ndim
        for d in range(x.ndim):
            ins[k].dims[d] = x.shape[d]
        ins[k].data, ins[k].size_bytes = x.ctypes.data, x.nbytes
        feeds[info.name.decode()] = x  # keep alive
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(a.model), so, providers=["CPUExecutionProvider"])
    ref = sess.run(None, feeds)
    outs = (Tensor * n_out)()
    bufs = []
    for k in range(n_out):
        info = TensorInfo()
        lib.kiln_model_output_info(model, ctypes.c_size_t(k), ctypes.byref(info))
        buf = np.empty(ref[k].shape, dtype=ref[k].dtype)
        bufs.append(buf)
        outs[k].dtype, outs[k].data, outs[k].size_bytes = info.dtype, buf.ctypes.data, buf.nbytes

    def kiln_run():
        if lib.kiln_run(model, ins, ctypes.c_size_t(n_in), outs, ctypes.c_size_t(n_out)) != 0:
            sys.exit(f"kiln_run: {lib.kiln_last_error().decode()}")

    t0 = time.perf_counter()
    kiln_run()
    first_ms = (time.perf_counter() - t0) * 1e3
    diff = max(float(np.max(np.abs(b.astype(np.float64) - r))) for b, r in zip(bufs, ref))
    times = {"kiln": [], "ort": []}
    for _ in range(a.rounds):
        for name, fn in (("kiln", kiln_run), ("ort", lambda: sess.run(None, feeds))):
            time.sleep(0.05)  # the other engine's pool threads stop spinning (kiln bench --settle-ms)
            fn()
            for _ in range(a.runs):
                t = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t) * 1e3)
    med = {k: statistics.median(v) for k, v in times.items()}
    mn = {k: min(v) for k, v in times.items()}
    print(f"{a.model.name} threads={a.threads} C API load {load_ms:.0f} ms, first run {first_ms:.0f} ms, "
          f"max |kiln-ort| {diff:.2e}")
    print(f"  kiln (C API) median {med['kiln']:.2f} ms min {mn['kiln']:.2f}   onnxruntime median {med['ort']:.2f} "
          f"min {mn['ort']:.2f}   ratio median {med['kiln'] / med['ort']:.3f} min {mn['kiln'] / mn['ort']:.3f}")
    lib.kiln_model_free(model)


if __name__ == "__main__":
    main()
