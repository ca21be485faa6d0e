#!/usr/bin/env python3
"""Writes the node test cases of the installed `onnx` wheel in backend-test layout
(OUT/test_x/model.onnx + test_data_set_N/{input,output}_K.pb). The wheel ships the case
generators, not the data folders, so the data is produced here. Usage: gen_wheel_node_tests.py OUT

Cases whose expected output is undefined by the spec are not written: a Cast/CastLike from a
floating-point type to an integer type with an input outside the target's range ("fixed point:
undefined if OOR"). Their data follows whatever ml_dtypes does (0.6 wraps, 0.7 gives 0), so
they would pass or fail with the installed ml_dtypes instead of with kiln."""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.case import node


def to_proto(x, info):
    t = info.type
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(x, info.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(x, info.name)
    if isinstance(x, onnx.TensorProto):
        x.name = info.name
        return x
    return numpy_helper.from_array(x, info.name)


# (bits, signed) of ONNX's integer element types, and its floating-point types (names an older
# onnx lacks are left out).
def _types(names):
    return {getattr(onnx.TensorProto, n): v for n, v in names.items() if hasattr(onnx.TensorProto, n)}


INTEGER_TYPES = _types({"INT2": (2, True), "UINT2": (2, False), "INT4": (4, True), "UINT4": (4, False),
                        "INT8": (8, True), "UINT8": (8, False), "INT16": (16, True), "UINT16": (16, False),
                        "INT32": (32, True), "UINT32": (32, False), "INT64": (64, True), "UINT64": (64, False)})
FLOAT_TYPES = set(_types({n: None for n in ("FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "FLOAT8E4M3FN",
                                            "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0",
                                            "FLOAT4E2M1")}))


def elem_type(info):
    t = info.type
    return t.tensor_type.elem_type if t.HasField("tensor_type") else None


def undefined_cast(case):
    """Why the case's expected output is undefined by the Cast spec, or None."""
    graph = case.model.graph
    if not graph.input or not graph.output or not any(
            n.op_type in ("Cast", "CastLike") and n.input and n.input[0] == graph.input[0].name for n in graph.node):
        return None
    src, dst = elem_type(graph.input[0]), elem_type(graph.output[0])
    if src not in FLOAT_TYPES or dst not in INTEGER_TYPES:
        return None
    bits, signed = INTEGER_TYPES[dst]
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    for inputs, _ in case.data_sets:
        x = inputs[0]
        if isinstance(x, onnx.TensorProto):
            x = numpy_helper.to_array(x)
        x = np.trunc(np.asarray(x).astype(np.float64))
        if not np.all(np.isfinite(x) & (x >= lo) & (x <= hi)):
            return (f"expected output undefined (Cast of {onnx.TensorProto.DataType.Name(src)} values outside "
                    f"the {onnx.TensorProto.DataType.Name(dst)} range)")
    return None


def main():
    out = sys.argv[1]
    if os.path.exists(out):
        shutil.rmtree(out)
    written = skipped = 0
    for case in node.collect_testcases(None):
        d = os.path.join(out, case.name)
        why_not = undefined_cast(case)
        if why_not:
            skipped += 1
            print(f"not generated: {case.name}: {why_not}", file=sys.stderr)
            continue
        try:
            os.makedirs(d)
            with open(os.path.join(d, "model.onnx"), "wb") as f:
                f.write(case.model.SerializeToString())
            for i, (inputs, outputs) in enumerate(case.data_sets):
                ds = os.path.join(d, f"test_data_set_{i}")
                os.makedirs(ds)
                for kind, values, infos in (("input", inputs, case.model.graph.input),
                                            ("output", outputs, case.model.graph.output)):
                    for j, x in enumerate(values):
                        with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                            f.write(to_proto(x, infos[j]).SerializeToString())
            written += 1
        except Exception as e:  # a case the installed numpy/onnx cannot materialize
            shutil.rmtree(d, ignore_errors=True)
            skipped += 1
            print(f"not generated: {case.name}: {e}", file=sys.stderr)
    print(f"onnx {onnx.__version__}: wrote {written} node cases to {out} ({skipped} not generated)")


if __name__ == "__main__":
    main()
