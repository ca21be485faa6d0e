#!/usr/bin/env python3
"""Writes the node test cases of the installed `onnx` wheel in backend-test layout
(OUT/test_x/model.onnx + test_data_set_N/{input,output}_K.pb). The wheel ships the case
generators, not the data folders, so the data is produced here. Usage: gen_wheel_node_tests.py OUT"""
import os
import shutil
import sys

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


def main():
    out = sys.argv[1]
    if os.path.exists(out):
        shutil.rmtree(out)
    written = skipped = 0
    for case in node.collect_testcases(None):
        d = os.path.join(out, case.name)
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
