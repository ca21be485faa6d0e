"""A few ONNX backend node tests (libonnx-testdata: model.onnx + test_data_set_0/*.pb) through
both engines of the Python API, compared with the expected outputs stored with them."""

import glob
import os

import numpy as np
import pytest

import kiln
from conftest import LIBONNX_NODE

CASES = [
    "test_relu", "test_add_bcast", "test_matmul_2d", "test_gemm_all_attributes", "test_conv_with_strides_padding",
    "test_maxpool_2d_default", "test_softmax_axis_1", "test_reduce_mean_default_axes_keepdims_example",
    "test_transpose_default", "test_concat_2d_axis_0", "test_gather_0", "test_where_example", "test_equal",
    "test_argmax_default_axis_example", "test_cast_FLOAT_to_FLOAT16", "test_layer_normalization_2d_axis0",
    "test_identity_sequence",
]


def read_pb(path, sequence):
    import onnx
    from onnx import numpy_helper

    proto = onnx.SequenceProto() if sequence else onnx.TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    if sequence:
        return proto.name, [numpy_helper.to_array(t) for t in proto.tensor_values]
    return proto.name, numpy_helper.to_array(proto)


@pytest.mark.parametrize("engine", ["compiled", "interp"])
@pytest.mark.parametrize("case", CASES)
def test_node_case(case, engine):
    folder = os.path.join(LIBONNX_NODE, case)
    if not os.path.isdir(folder):
        pytest.skip(f"{folder} not found (Debian package libonnx-testdata)")
    import onnx

    model = onnx.load(os.path.join(folder, "model.onnx"))
    seq_inputs = [i.type.HasField("sequence_type") for i in model.graph.input]
    seq_outputs = {o.name: o.type.HasField("sequence_type") for o in model.graph.output}
    data = os.path.join(folder, "test_data_set_0")
    feeds = {}
    for k, p in enumerate(sorted(glob.glob(os.path.join(data, "input_*.pb")), key=lambda s: int(s.split("_")[-1][:-3]))):
        name, value = read_pb(p, seq_inputs[k])
        feeds[name or model.graph.input[k].name] = value
    sess = kiln.load(os.path.join(folder, "model.onnx"), engine=engine)
    got = sess.run(feeds)
    for k, p in enumerate(sorted(glob.glob(os.path.join(data, "output_*.pb")), key=lambda s: int(s.split("_")[-1][:-3]))):
        out_name = model.graph.output[k].name
        _, want = read_pb(p, seq_outputs[out_name])
        g = got[out_name]
        if seq_outputs[out_name]:
            assert len(g) == len(want)
            for a, b in zip(g, want):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        else:
            assert g.dtype == want.dtype and g.shape == want.shape, (g.dtype, g.shape, want.dtype, want.shape)
            np.testing.assert_allclose(g.astype(np.float64) if g.dtype == np.float16 else g,
                                       want.astype(np.float64) if want.dtype == np.float16 else want,
                                       rtol=1e-3 if want.dtype == np.float16 else 1e-4, atol=1e-5)
