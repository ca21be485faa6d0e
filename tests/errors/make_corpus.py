#!/usr/bin/env python3
"""Writes the malformed/unsupported model corpus into tests/errors/models/.

Each model must make `kiln run MODEL` fail with a one-line error and the exit code given in
expected.txt (3 = invalid or unsupported model). Run it with the project's venv python:
    .venv/bin/python tests/errors/make_corpus.py
The script is deterministic; the .onnx files it writes are committed.
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "models")
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def vi(name, elem=F, shape=(2, 3)):
    return helper.make_tensor_value_info(name, elem, list(shape))


def model(nodes, inputs, outputs, inits=(), opset=17, ir=8, opsets=None, **graph_kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), **graph_kw)
    ops = opsets if opsets is not None else [helper.make_opsetid("", opset)]
    m = helper.make_model(g, opset_imports=ops, producer_name="kiln-error-corpus")
    m.ir_version = ir
    return m


def save(name, m):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(m.SerializeToString() if hasattr(m, "SerializeToString") else m)


def relu_model():
    return model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x")], [vi("y")])


def ext_tensor(name, location, offset=None, length=None, dims=(4,)):
    t = TensorProto()
    t.name = name
    t.data_type = F
    t.dims.extend(dims)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def ext_model(t):
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                 [vi("x", shape=(4,))], [vi("y", shape=(4,))], [t])


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    rng = np.random.default_rng(0)

    # --- file-level problems ---------------------------------------------------------------
    good = relu_model().SerializeToString()
    save("truncated.onnx", good[: len(good) // 2])
    save("garbage.onnx", bytes(rng.integers(0, 256, 512, dtype=np.uint8)))
    save("empty.onnx", b"")
    os.makedirs(os.path.join(OUT, "directory.onnx"))
    with open(os.path.join(OUT, "directory.onnx", "README"), "w") as f:
        f.write("A folder named like a model: kiln must say it is a directory.\n")

    # --- model-level problems --------------------------------------------------------------
    m = onnx.ModelProto()
    m.ir_version = 8
    m.opset_import.add().version = 17
    m.producer_name = "no-graph"
    save("no_graph.onnx", m)

    m = relu_model()
    m.ir_version = 0
    save("ir_version_0.onnx", m)

    save("opset_0.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")], opset=0))
    # Newer than kiln knows (onnx.checker: an IR version above its own; kiln also refuses opsets
    # above the newest it implements, since an op's meaning may have changed there).
    save("ir_version_newer.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")], ir=99))
    save("opset_newer.onnx", model([helper.make_node("Relu", ["x"], ["y"])], [vi("x")], [vi("y")], opset=99))
    # Structure onnx.checker rejects: a graph attribute on an op without subgraphs, and an
    # omitted (empty-named) output that the op always has.
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["z"])], "b", [], [vi("z")])
    save("graph_attr_on_relu.onnx", model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu_with_body", body=branch)], [vi("x")], [vi("y")]))
    # Attributes the op's schema does not define, or of another type than the schema's.
    save("attr_unknown.onnx", model([helper.make_node("Relu", ["x"], ["y"], name="relu_frob", frobnicate=3)],
                                    [vi("x")], [vi("y")]))
    save("attr_type_vs_schema.onnx", model([helper.make_node("Transpose", ["x"], ["y"], name="transpose_f", perm=1.5)],
                                       [vi("x")], [vi("y", shape=(3, 2))]))
    save("required_output_unnamed.onnx", model(
        [helper.make_node("Relu", ["x"], [""], name="relu_no_output"), helper.make_node("Relu", ["x"], ["y"])],
        [vi("x")], [vi("y")]))

    # --- graph structure -------------------------------------------------------------------
    save("undefined_input.onnx", model([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")],
                                       [vi("x")], [vi("y")]))
    save("output_not_produced.onnx", model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                           [vi("x")], [vi("missing_out")]))
    save("cycle.onnx", model([helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
                              helper.make_node("Relu", ["a"], ["b"], name="n2")], [vi("x")], [vi("a")]))
    save("duplicate_output.onnx", model([helper.make_node("Relu", ["x"], ["y"], name="first"),
                                         helper.make_node("Sigmoid", ["x"], ["y"], name="second")],
                                        [vi("x")], [vi("y")]))
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    save("duplicate_initializer.onnx", model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                             [vi("x")], [vi("y")], [w, w]))

    # --- ops, domains, opsets, arity, attributes ---------------------------------------------
    save("unknown_op.onnx", model([helper.make_node("FrobnicateTensor", ["x"], ["y"], name="frob")],
                                  [vi("x")], [vi("y")]))
    save("unknown_domain.onnx", model([helper.make_node("Relu", ["x"], ["y"], name="r", domain="com.example")],
                                      [vi("x")], [vi("y")]))
    save("opset_too_old.onnx", model([helper.make_node("Gelu", ["x"], ["y"], name="gelu")],
                                     [vi("x")], [vi("y")], opset=13))
    save("relu_two_inputs.onnx", model([helper.make_node("Relu", ["x", "x"], ["y"], name="relu2")],
                                       [vi("x")], [vi("y")]))
    wc = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    save("attr_wrong_type.onnx", model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides="1,1")],
        [vi("x", shape=(1, 3, 8, 8))], [vi("y", shape=(1, 4, 6, 6))], [wc]))
    save("missing_attr.onnx", model([helper.make_node("Cast", ["x"], ["y"], name="cast")],
                                    [vi("x")], [vi("y", I64)]))

    # --- tensors / initializers -------------------------------------------------------------
    def init_model(t, shape=(2, 3)):
        return model([helper.make_node("Add", ["x", t.name], ["y"], name="add")],
                     [vi("x", shape=shape)], [vi("y", shape=shape)], [t])

    t = TensorProto(name="w", data_type=F, dims=[2, -3])
    save("negative_dims.onnx", init_model(t))
    t = TensorProto(name="w", data_type=F, dims=[1 << 40, 1 << 40])
    t.raw_data = b"\0" * 16
    save("overflow_dims.onnx", init_model(t))
    t = TensorProto(name="w", data_type=F, dims=[2, 3])
    t.raw_data = b"\0" * 20
    save("raw_size_mismatch.onnx", init_model(t))
    t = TensorProto(name="w", data_type=F, dims=[2, 3])
    t.float_data.extend([1.0, 2.0, 3.0, 4.0])
    save("typed_count_mismatch.onnx", init_model(t))
    t = TensorProto(name="w", data_type=123, dims=[2, 3])
    save("unknown_data_type.onnx", init_model(t))

    # External data; ext_16bytes.bin holds 16 bytes (4 floats).
    with open(os.path.join(OUT, "ext_16bytes.bin"), "wb") as f:
        f.write(np.arange(4, dtype=np.float32).tobytes())
    save("external_escape.onnx", ext_model(ext_tensor("w", "../secret.bin")))
    save("external_absolute.onnx", ext_model(ext_tensor("w", "/etc/passwd")))
    save("external_missing.onnx", ext_model(ext_tensor("w", "no_such_file.bin")))
    save("external_past_end.onnx", ext_model(ext_tensor("w", "ext_16bytes.bin", offset=8, length=16)))

    sp = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32), "w"),
                                   numpy_helper.from_array(np.array([0], np.int64), "w_idx"), [2, 3])
    save("sparse_initializer.onnx", model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                                          [vi("x")], [vi("y")], sparse_initializer=[sp]))

    map_in = helper.make_value_info("m", helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, [])))
    save("map_input.onnx", model([helper.make_node("Identity", ["m"], ["y"], name="id")], [map_in], [vi("y")]))

    # --- subgraphs ---------------------------------------------------------------------------
    cond = numpy_helper.from_array(np.array(True), "cond")
    then_g = helper.make_graph([helper.make_node("Relu", ["undefined_in_branch"], ["t"], name="then_relu")],
                               "then", [], [vi("t")])
    else_g = helper.make_graph([helper.make_node("Relu", ["x"], ["e"], name="else_relu")], "else", [], [vi("e")])
    save("if_undefined_value.onnx", model(
        [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g)],
        [vi("x")], [vi("y")], [cond]))

    # 100 levels of If. Python's protobuf refuses to build messages this deep, so the then_branch
    # attributes are spliced in as raw wire-format bytes.
    def field(num, payload):  # length-delimited field
        return varint(num << 3 | 2) + varint(len(payload)) + payload
    def varint(v):
        out = b""
        while True:
            b, v = v & 0x7F, v >> 7
            out += bytes([b | (0x80 if v else 0)])
            if not v:
                return out
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["o0"])], "leaf", [], [vi("o0")])
    graph = graph.SerializeToString()
    for level in range(1, 100):
        out = "o%d" % level
        leaf = helper.make_graph([helper.make_node("Relu", ["x"], ["e%d" % level])], "else%d" % level, [],
                                 [vi("e%d" % level)])
        node = helper.make_node("If", ["cond"], [out], else_branch=leaf).SerializeToString()
        then_attr = field(1, b"then_branch") + field(6, graph) + varint(20 << 3) + varint(5)
        node += field(5, then_attr)
        graph = field(1, node) + field(2, b"lvl%d" % level) + field(12, vi(out).SerializeToString())
    top = helper.make_node("If", ["cond"], ["y"], name="outer_if", else_branch=else_g).SerializeToString()
    top += field(5, field(1, b"then_branch") + field(6, graph) + varint(20 << 3) + varint(5))
    m = model([], [vi("x")], [vi("y")], [cond])
    m.graph.ClearField("node")
    # Append the top node to the graph (field 7 of ModelProto holds the graph).
    gbytes = m.graph.SerializeToString() + field(1, top)
    m.ClearField("graph")
    save("deep_nesting.onnx", m.SerializeToString() + field(7, gbytes))

    # --- model-local functions ---------------------------------------------------------------
    fopset = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    rec = helper.make_function("local", "Rec", ["a"], ["b"],
                               [helper.make_node("Rec", ["a"], ["b"], domain="local")], fopset)
    m = model([helper.make_node("Rec", ["x"], ["y"], name="call_rec", domain="local")],
              [vi("x")], [vi("y")], opsets=fopset)
    m.functions.append(rec)
    save("recursive_function.onnx", m)
    # F0 calls F1 twice, F1 calls F2 twice, ...: 2^30 nodes once inlined.
    funcs = []
    for i in range(30):
        body = [helper.make_node("F%d" % (i + 1), ["a"], ["t"], domain="local"),
                helper.make_node("F%d" % (i + 1), ["t"], ["b"], domain="local")] if i < 29 else \
               [helper.make_node("Relu", ["a"], ["b"])]
        funcs.append(helper.make_function("local", "F%d" % i, ["a"], ["b"], body, fopset))
    m = model([helper.make_node("F0", ["x"], ["y"], name="call_f0", domain="local")],
              [vi("x")], [vi("y")], opsets=fopset)
    m.functions.extend(funcs)
    save("function_blowup.onnx", m)

    # --- run-time conflicts inside the model (static input shapes: random inputs reach them) --
    c = numpy_helper.from_array(np.ones((2, 3), np.int64), "c")
    save("type_mismatch.onnx", model([helper.make_node("Add", ["x", "c"], ["y"], name="add_f32_i64")],
                                     [vi("x")], [vi("y")], [c]))
    shp = numpy_helper.from_array(np.array([4, 4], np.int64), "shape")
    save("reshape_incompatible.onnx", model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Reshape", ["r", "shape"], ["y"], name="bad_reshape")],
        [vi("x")], [vi("y", shape=(4, 4))], [shp]))
    idx = numpy_helper.from_array(np.array([0, 7], np.int64), "idx")
    save("gather_out_of_range.onnx", model(
        [helper.make_node("Gather", ["x", "idx"], ["y"], name="bad_gather", axis=0)],
        [vi("x")], [vi("y", shape=(2, 3))], [idx]))
    wc = numpy_helper.from_array(np.ones((4, 5, 3, 3), np.float32), "w")
    save("conv_channel_mismatch.onnx", model(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="bad_conv")],
        [vi("x", shape=(1, 3, 8, 8))], [vi("y", shape=(1, 4, 6, 6))], [wc]))


if __name__ == "__main__":
    main()
