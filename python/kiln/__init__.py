"""kiln: a deep-learning compiler and inference engine for ONNX models, from Python.

This module is the documented API over the C++ extension ``kiln._kiln``: it normalizes
arguments (paths, feeds, DLPack producers) and wraps metadata; the work happens in C++.
See docs/python.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _cli, _kiln
from ._kiln import (
    BadInputError,
    CancelledError,
    Error,
    InternalError,
    InvalidModelError,
    ResourceLimitError,
    RunTimeoutError,
    TensorOwner,
    UnsupportedError,
    UsageError,
)

__version__: str = _kiln.__version__

# The brief name for a malformed model, next to the one that mirrors kiln's ErrorKind.
BadModelError = InvalidModelError

__all__ = [
    "__version__",
    "load",
    "inspect",
    "optimize",
    "quantize",
    "compile",
    "tune",
    "empty",
    "Session",
    "TensorInfo",
    "TensorOwner",
    "Error",
    "InternalError",
    "UsageError",
    "InvalidModelError",
    "BadModelError",
    "UnsupportedError",
    "BadInputError",
    "CancelledError",
    "RunTimeoutError",
    "ResourceLimitError",
]

PathLike = Union[str, "os.PathLike[str]"]
Dim = Union[int, str, None]


@dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: name, NumPy dtype (None when NumPy has none, e.g. bfloat16
    without ml_dtypes), kiln's dtype name ("f32", ...), shape (ints, names of symbolic dims, or
    None for unnamed unknown dims; None for an unknown rank) and kind ("tensor", "sequence",
    "optional")."""

    name: str
    dtype: Optional[np.dtype]
    kiln_dtype: Optional[str]
    shape: Optional[Tuple[Dim, ...]]
    kind: str = "tensor"
    has_default: bool = False


def _info(d: Mapping[str, Any]) -> TensorInfo:
    return TensorInfo(
        name=d["name"],
        dtype=d["dtype"],
        kiln_dtype=d["kiln_dtype"],
        shape=d["shape"],
        kind=d["kind"],
        has_default=d["has_default"],
    )


def _usage_error(message: str) -> UsageError:
    """A UsageError raised by the Python layer, shaped like those from C++."""
    e = UsageError("usage error: " + message)
    e.kind, e.exit_code, e.message = "usage error", 2, message
    e.file = e.node = e.op = e.pass_name = None
    return e


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class Session:
    """A loaded, compiled model. Create with :func:`kiln.load`.

    ``run`` may be called from several Python threads at once: the GIL is released while the
    model runs, and the session runs one inference at a time (the engines keep per-run state).
    :meth:`cancel` stops runs from another thread.
    """

    def __init__(self, impl: "_kiln.Session") -> None:
        self._impl = impl
        self._inputs = [_info(d) for d in impl.inputs]
        self._outputs = [_info(d) for d in impl.outputs]
        self._by_name = {i.name: i for i in self._inputs}

    @property
    def inputs(self) -> List[TensorInfo]:
        """The inputs a caller must feed: graph inputs without an initializer default (inputs
        with one may still be fed by name)."""
        return list(self._inputs)

    @property
    def outputs(self) -> List[TensorInfo]:
        return list(self._outputs)

    @property
    def engine(self) -> str:
        return self._impl.engine

    def run(
        self, feeds: Union[Mapping[str, Any], Sequence[Any]], *, timeout: Optional[float] = None
    ) -> Dict[str, np.ndarray]:
        """Runs the model. ``feeds`` maps input names to arrays, or lists arrays in the order of
        :attr:`inputs`. Arrays are used in place (no copy) when C-contiguous, 64-byte aligned and
        of a dtype kiln has (see :func:`kiln.empty`); other buffers are copied once. Objects with
        ``__dlpack__`` are imported through ``numpy.from_dlpack``; Python lists and scalars are
        converted to the input's dtype. Returns ``{output name: numpy.ndarray}``; the arrays own
        kiln's result memory (their ``.base`` is a :class:`TensorOwner`).

        ``timeout`` (seconds) stops a run that takes longer with :class:`RunTimeoutError`;
        :meth:`cancel` stops it with :class:`CancelledError`. Both are checked between kernel
        steps (and between nodes on the interpreter), and the session stays usable. The time
        counts from the call, including waiting for another thread's run and compiling a new
        input-shape signature (which is not interrupted)."""
        if isinstance(feeds, Mapping):
            prepared: Any = {k: self._array(k, v) for k, v in feeds.items()}
        elif isinstance(feeds, (list, tuple)):
            prepared = [
                self._array(self._inputs[i].name if i < len(self._inputs) else str(i), v)
                for i, v in enumerate(feeds)
            ]
        else:
            raise _usage_error(
                "Session.run takes a dict {input name: array} or a list of arrays, got " + type(feeds).__name__
            )
        if timeout is not None and not timeout > 0:
            raise _usage_error(f"timeout must be a positive number of seconds, got {timeout!r}")
        return self._impl.run(prepared, float(timeout or 0.0))

    def cancel(self) -> None:
        """Cancels the runs of this session that started before the call (running, or waiting
        for another run to finish): they raise :class:`CancelledError`. Later runs are not
        affected. Safe to call from any thread."""
        self._impl.cancel()

    def _array(self, name: str, value: Any) -> Any:
        info = self._by_name.get(name) if isinstance(name, str) else None
        if value is None or isinstance(value, np.ndarray):
            return value
        if info is not None and info.kind == "sequence" and isinstance(value, (list, tuple)):
            return [self._array(name, v) for v in value]
        if hasattr(value, "__dlpack__") and not isinstance(value, (bytes, bytearray, memoryview)):
            return np.from_dlpack(value)
        try:
            memoryview(value)
            return np.asarray(value)  # buffer protocol: a view, no copy
        except TypeError:
            pass
        dtype = info.dtype if info is not None and info.dtype is not None else None
        if dtype is not None and dtype.kind == "O":
            dtype = None
        return np.asarray(value, dtype=dtype)

    def profile(self) -> List[Dict[str, Any]]:
        """Per-node (interpreter) or per-kernel step (compiled engine) wall times of the last
        run: ``[{"node": str, "op": str, "ms": float}, ...]`` in execution order. Needs
        ``kiln.load(..., profile=True)``."""
        return self._impl.profile()

    def last_copied_inputs(self) -> List[str]:
        """Names of the inputs the last run had to copy (not C-contiguous, not 64-byte aligned,
        byte-swapped, strings, ...); the others were read in place."""
        return self._impl.last_copied_inputs()

    def plan_stats(self) -> Dict[str, Any]:
        """How the compiled engine planned the last run's input shapes: ``planned`` (False when a
        cached plan ran), where the shapes came from, the time of each phase in ms (``shapes_ms``,
        ``lowering_ms``, ``llvm_ms``, ``total_ms``), ``kernels`` (steps), ``compiled_kernels``
        (distinct kernels) and ``library_kernels`` (of those, compiled by an earlier plan: a
        new batch size or sequence length whose kernels exist runs no LLVM), ``arena_bytes``,
        ``external_regions`` and ``external_nodes`` (regions run by ``offload`` backends and
        their nodes)."""
        return self._impl.plan_stats()

    def __repr__(self) -> str:
        ins = ", ".join(f"{i.name}: {i.kiln_dtype}{list(i.shape or [])}" for i in self._inputs)
        outs = ", ".join(f"{o.name}: {o.kiln_dtype}{list(o.shape or [])}" for o in self._outputs)
        return f"<kiln.Session engine={self.engine} ({ins}) -> ({outs})>"


def load(
    model: Union[PathLike, bytes, bytearray, memoryview],
    threads: Optional[int] = None,
    engine: str = "compiled",
    optimize: bool = True,
    *,
    profile: bool = False,
    seed: int = 0,
    max_memory: Union[int, str, None] = None,
    records: Optional[PathLike] = None,
    offload: Union[str, Sequence[str], None] = None,
) -> Session:
    """Loads an ONNX model (a path, or the ModelProto bytes) and prepares it to run.

    engine: "compiled" (generated kernels) or "interp" (the reference interpreter).
    threads: worker threads of the compiled engine (default: the CPUs this process may use).
    optimize: with engine="interp", run the default graph-pass pipeline first (the compiled
        engine always runs it, as the CLI, ``kiln bench`` and the C API do).
    profile: record per-node / per-kernel timings (:meth:`Session.profile`).
    seed: seed of random ops (RandomNormal, Dropout in training mode, ...).
    max_memory: memory budget in bytes (or "512M", "2G", ...): the weights, packed GEMM
        weights, activations and outputs kiln plans for the model. A model or input shapes that
        need more raise :class:`ResourceLimitError` before allocating, with the numbers.
    records: tuning records written by ``kiln tune`` (a JSON-lines file): the kernel choices
        they hold for this CPU and ``threads`` are applied (compiled engine; docs/tuning.md).
    offload: external backends to run the regions they support on, first choice first
        (``"dnnl"``: oneDNN, or a list; compiled engine; docs/byoc.md, experimental).
    """
    if isinstance(model, (bytes, bytearray, memoryview)):
        source: Any = model
    elif isinstance(model, (str, os.PathLike)):
        source = os.fspath(model)
    else:
        raise _usage_error("kiln.load takes a path or the model's bytes, got " + type(model).__name__)
    if threads is None:
        threads = _default_threads()
    if max_memory is not None and not isinstance(max_memory, (int, str)):
        raise _usage_error("max_memory takes a byte count or a size like '512M', got " + type(max_memory).__name__)
    if offload is None:
        backends: List[str] = []
    elif isinstance(offload, str):
        backends = [offload]
    else:
        backends = [str(b) for b in offload]
    return Session(
        _kiln.load(source, int(threads), engine, bool(optimize), bool(profile), int(seed), max_memory,
                   os.fspath(records) if records is not None else "", backends)
    )


def inspect(
    path: PathLike,
    *,
    dims: Optional[Mapping[str, int]] = None,
    engine: str = "compiled",
    passes: bool = False,
) -> Dict[str, Any]:
    """The facts of ``kiln inspect --json PATH`` as a dict: IR version, opsets, inputs and
    outputs, op histogram, parameters, unsupported nodes, node counts before/after the default
    pipeline and its memory plan. ``dims`` binds named input dims for the memory plan (as
    ``--dim``); ``engine="compiled"`` (the default, as the CLI) also compiles and reports
    generated/microkernel/fallback nodes and kernels, ``engine="interp"`` skips that; ``passes=True``
    adds per-pass statistics."""
    if engine not in ("interp", "compiled"):
        raise _usage_error(f"unknown engine '{engine}' (expected interp or compiled)")
    text = _kiln.inspect_json(os.fspath(path), dict(dims or {}), engine == "compiled", bool(passes))
    return json.loads(text)


def optimize(
    in_path: PathLike,
    out_path: PathLike,
    *,
    passes: Optional[Sequence[str]] = None,
    disable: Sequence[str] = (),
    verify: bool = False,
) -> Dict[str, Any]:
    """Runs graph passes over an ONNX file and writes the result as ONNX (``kiln optimize IN -o
    OUT``). Returns ``{"nodes_before", "nodes_after", "passes": [{"pass", "ms", "nodes"}]}``."""
    return _kiln.optimize(
        os.fspath(in_path), os.fspath(out_path), list(passes or []), list(disable), bool(verify)
    )


def quantize(
    in_path: PathLike,
    out_path: PathLike,
    calibration: Union[PathLike, Sequence[Any], None] = None,
    *,
    calibration_random: int = 0,
    calibration_preprocess: Optional[str] = None,
    method: str = "minmax",
    percentile: float = 99.999,
    per_channel: bool = True,
    activation_type: str = "u8",
    reduce_range: bool = False,
    exclude: Sequence[str] = (),
    dynamic: bool = False,
    report: Optional[PathLike] = None,
    report_samples: int = 8,
    dims: Optional[Mapping[str, int]] = None,
    threads: int = 1,
    seed: int = 0,
    progress: bool = False,
) -> Dict[str, Any]:
    """Post-training int8 quantization into a QDQ ONNX model (``kiln quantize``; see
    docs/quantization.md). ``calibration`` is a folder of samples (as the CLI's
    ``--calibration``) or a sequence of samples in memory, each an array (single-input models),
    a list of arrays in input order, or a dict by input name. ``method``: ``minmax``,
    ``entropy`` or ``percentile``. ``dynamic=True`` quantizes MatMul/Gemm weights only (no
    calibration). ``report`` (.json or .html) writes the per-tensor SQNR / cosine against the
    float model. Returns counts, notes, the model outputs' accuracy (with ``report``) and the
    quantized activations (``tensors``: range, scale, zero point; SQNR with ``report``)."""
    o = _kiln.QuantizeOptions()
    samples = None
    if isinstance(calibration, (str, os.PathLike)):
        o.calibration_dir = os.fspath(calibration)
    elif calibration is not None:
        samples = list(calibration)
    o.calibration_random = int(calibration_random)
    o.image_preprocess = calibration_preprocess or ""
    o.percentile = float(percentile)
    o.per_channel = bool(per_channel)
    o.reduce_range = bool(reduce_range)
    o.exclude = set(exclude)
    o.dynamic = bool(dynamic)
    o.report_path = os.fspath(report) if report is not None else ""
    o.report_samples = int(report_samples)
    o.dims = dict(dims or {})
    o.threads = int(threads)
    o.seed = int(seed)
    return _kiln.quantize(os.fspath(in_path), os.fspath(out_path), samples, o, activation_type, method,
                          bool(progress))


def _cli_error(exit_code: int, message: str) -> Error:
    """The exception a CLI exit code stands for (docs/errors.md), shaped like those from C++."""
    cls = {2: UsageError, 3: InvalidModelError, 4: BadInputError, 5: ResourceLimitError}.get(exit_code, Error)
    e = cls(message)
    e.kind, e.exit_code, e.message = cls.__name__, exit_code, message
    e.file = e.node = e.op = e.pass_name = None
    return e


def tune(
    model: PathLike,
    records: PathLike,
    *,
    budget: Union[str, float] = "10m",
    threads: Optional[int] = None,
    resume: bool = False,
    batch: int = 1,
    dims: Optional[Mapping[str, int]] = None,
    runs: int = 10,
    timeout: float = 60.0,
    patience: int = 16,
    seed: int = 0,
    progress: bool = True,
    offload: bool = True,
) -> Dict[str, Any]:
    """Auto-tuning (``kiln tune``; experimental, docs/tuning.md): searches the kernel choice of
    each Conv and MatMul/Gemm shape of the model on this CPU, timing them inside whole-model
    runs in a worker process, and appends every measurement to ``records`` (a JSON-lines file,
    or a directory). ``budget``: seconds or "10m" / "90s" / "1h". ``threads``: the count the
    kernels are timed with and the records apply to (default: the CPUs this process may use).
    ``resume``: add to an existing records file, reusing its measurements. ``progress``: the
    live status line on stderr. ``offload``: first time the whole model on kiln's kernels and
    with each available external backend (docs/byoc.md) and record the fastest, which
    ``kiln.load(..., records=...)`` then applies (``False``: kiln's own kernels only). Apply the
    records with ``kiln.load(model, records=records)``.
    Returns the summary: ``records`` (the file written), ``offload`` (the backend the records
    choose, "" for kiln's own), ``offload_model_ms``, ``trials``, ``invalid``, ``rounds``,
    ``elapsed_s``, ``default_total_us``, ``tuned_total_us`` and per task ``key``, ``steps``,
    ``default_us``, ``tuned_us``, ``choice``."""
    exe = os.environ.get("KILN_CLI") or _cli.executable()
    if not os.access(exe, os.X_OK):
        raise UnsupportedError(
            "unsupported: kiln.tune needs the kiln CLI (" + exe + "), which an installed kiln package carries; "
            "set KILN_CLI to a build's tools/kiln/kiln"
        )
    if threads is None:
        threads = _default_threads()
    if isinstance(budget, (int, float)) and not isinstance(budget, bool):
        budget = f"{float(budget)}s"
    cmd = [exe, "tune", os.fspath(model), "--records", os.fspath(records), "--budget", str(budget),
           "--threads", str(int(threads)), "--batch", str(int(batch)), "--runs", str(int(runs)),
           "--timeout", str(float(timeout)), "--patience", str(int(patience)), "--seed", str(int(seed)), "--json"]
    if resume:
        cmd.append("--resume")
    if not offload:
        cmd.append("--no-offload")
    for name, value in (dims or {}).items():
        cmd += ["--dim", f"{name}={int(value)}"]
    env = dict(os.environ)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    last = ""
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:
        if line.strip():
            last = line.strip()
        if progress:
            sys.stderr.write(line)
            sys.stderr.flush()
    out = proc.stdout.read()
    code = proc.wait()
    if code != 0:
        message = last[len("kiln: "):] if last.startswith("kiln: ") else last
        raise _cli_error(code, message or f"kiln tune exited with status {code}")
    return json.loads(out)


def compile(  # noqa: A001 - the CLI's name
    path: PathLike,
    out_so: PathLike,
    target: str = "native",
    *,
    dims: Optional[Mapping[str, Union[int, Sequence[int]]]] = None,
    threads: int = 1,
    shapes: Optional[Mapping[str, Sequence[int]]] = None,
    inputs: Optional[Sequence[np.ndarray]] = None,
) -> Dict[str, Any]:
    """Ahead-of-time export (``kiln compile MODEL -o OUT.so``): compiles the model for fixed
    input shapes (named dims from ``dims``, others 1) into one shared library holding the
    kernels, the plans, the weights and kiln's C API (docs/c_api.md). A dim given a list of
    sizes (``dims={"seq": [16, 64, 128]}``) makes a plan per combination of sizes (at most 64);
    the library runs exactly those input shapes, sharing kernels and weights. ``shapes`` gives
    inputs their whole shape (``{"x": [1, 3, 48, 192]}``: symbolic dims without names).
    ``inputs`` (arrays in input order) runs the compile on real values instead of random ones,
    for models whose plan depends on them (silero-VAD's sample rate); the library then runs
    their shapes. ``target``:
    "native", "x86-64-v3" (AVX2) or "x86-64-v4" (AVX-512). Raises UnsupportedError naming the
    nodes that would need reference kernels. Returns sizes, node counts and times."""
    if not hasattr(_kiln, "compile"):
        raise UnsupportedError(
            "unsupported: kiln.compile (ahead-of-time export to a shared library) is not "
            "available in this build of kiln; use kiln.load(...) to compile and run in process"
        )
    # The wheel ships the runtime archive the library links against (python/CMakeLists.txt);
    # in-tree builds fall back to $KILN_RUNTIME_LIB or the build's own archive.
    archive = os.path.join(os.path.dirname(__file__), "lib", "libkiln_runtime.a")
    if os.environ.get("KILN_RUNTIME_LIB") or not os.path.exists(archive):
        archive = ""
    sizes = {
        name: [int(v)] if isinstance(v, (int, np.integer)) else [int(x) for x in v]
        for name, v in (dims or {}).items()
    }
    whole = {name: [int(d) for d in shape] for name, shape in (shapes or {}).items()}
    with tempfile.TemporaryDirectory(prefix="kiln-compile-") as tmp:
        files = []
        for i, value in enumerate(inputs or []):
            files.append(os.path.join(tmp, f"input{i}.npy"))
            np.save(files[-1], np.asarray(value))
        return _kiln.compile(os.fspath(path), os.fspath(out_so), target, sizes, int(threads), archive, whole, files)


def empty(shape: Union[int, Sequence[int]], dtype: Any = np.float32) -> np.ndarray:
    """A zero-filled array in kiln-owned, 64-byte aligned memory: feeding it to
    :meth:`Session.run` is zero-copy whatever its size."""
    if isinstance(shape, int):
        shape = (shape,)
    return _kiln.empty([int(d) for d in shape], np.dtype(dtype).name)
