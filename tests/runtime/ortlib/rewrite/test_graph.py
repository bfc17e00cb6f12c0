"""The matchers' view of a graph: constants folded through what exporters put in front of them, and
types and shapes carried past ORT's contrib ops."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the rewrite reads ONNX models")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.graph import Graph  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opsets=(("", 17),)):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def test_constants_fold_through_identity_unsqueeze_expand_cast_concat_and_a_fixed_shape():
    f = TensorProto.FLOAT
    w = np.arange(4, dtype=np.float16)
    nodes = [helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(np.array([1, 2], np.int64))),
             helper.make_node("Identity", ["w"], ["w1"]),
             helper.make_node("Unsqueeze", ["w1", "axes"], ["w2"]),
             helper.make_node("Cast", ["w2"], ["w3"], to=TensorProto.FLOAT),
             helper.make_node("Expand", ["w3", "shape"], ["w4"]),
             helper.make_node("Shape", ["x"], ["xs"]),
             helper.make_node("Concat", ["xs", "axes"], ["cat"], axis=0),
             helper.make_node("Relu", ["x"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", f, [2, 4, 3, 3])],
               [helper.make_tensor_value_info("y", f, None)],
               [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array([1, 4, 1, 1], np.int64), "shape")])
    g = Graph(m)
    assert g.const("w4").shape == (1, 4, 1, 1) and g.const("w4").dtype == np.float32
    np.testing.assert_array_equal(g.const("w4").reshape(-1), w.astype(np.float32))
    assert g.const("cat").tolist() == [2, 4, 3, 3, 1, 2]
    assert g.const("y") is None and g.const("nothing") is None
    assert g.only_reader("w1").op_type == "Unsqueeze" and g.only_reader("x") is None  # Shape and Relu read x


def test_shape_arithmetic_folds_where_the_dim_it_reads_is_fixed_and_float_arithmetic_never():
    """chunk(2, -1)'s bounds as TorchScript computes them, on a tensor whose batch and tokens are symbolic."""
    f, i64 = TensorProto.FLOAT, TensorProto.INT64
    c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(  # noqa: E731
        np.array(v, np.int64)))
    nodes = [helper.make_node("Shape", ["x"], ["s"]), c("last", -1), c("first", 0), c("one", [1]), c("two", [2]),
             helper.make_node("Gather", ["s", "last"], ["d"], axis=0),
             helper.make_node("Gather", ["s", "first"], ["batch"], axis=0),
             helper.make_node("Add", ["d", "one"], ["d1"]), helper.make_node("Div", ["d1", "two"], ["half"]),
             helper.make_node("Mul", ["half", "two"], ["end"]), helper.make_node("Sub", ["end", "one"], ["less"]),
             helper.make_node("Add", ["x", "x"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", f, ["batch", "tokens", 7])],
               [helper.make_tensor_value_info("y", f, None), helper.make_tensor_value_info("less", i64, None)])
    g = Graph(m)
    assert g.const("d").tolist() == 7 and g.const("half").tolist() == [4] and g.const("end").tolist() == [8]
    assert g.const("less").tolist() == [7]
    assert g.const("batch") is None  # the batch is symbolic
    assert g.const("y") is None  # a float Add is never walked


def test_types_and_shapes_go_past_nhwc_conv_and_group_norm():
    """What ORT's optimizer writes: NhwcConv (weights M x kH x kW x C) -> GroupNorm -> Softmax; ONNX's
    inference stops at the first, the stand-ins carry it through."""
    h = TensorProto.FLOAT16
    w = numpy_helper.from_array(np.zeros((6, 3, 3, 4), np.float16), "w")
    g_b = [numpy_helper.from_array(np.ones(6, np.float32), n) for n in ("gamma", "beta")]
    nodes = [helper.make_node("NhwcConv", ["x", "w"], ["c"], domain="com.microsoft", kernel_shape=[3, 3],
                              pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("GroupNorm", ["c", "gamma", "beta"], ["n"], domain="com.microsoft", groups=2,
                              activation=0, channels_last=1, epsilon=1e-5),
             helper.make_node("Softmax", ["n"], ["y"], axis=-1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", h, [1, 8, 8, 4])],
               [helper.make_tensor_value_info("y", h, None)], [w, *g_b], (("", 17), ("com.microsoft", 1)))
    g = Graph(m)
    assert (g.elem("c"), g.dims("c")) == (h, [1, 4, 4, 6])
    assert (g.elem("n"), g.dims("n")) == (h, [1, 4, 4, 6])
    assert g.dims("y") == [1, 4, 4, 6]
    assert not [n for n in m.graph.node if "probe" in "".join(n.output)]  # the stand-ins never reach the model


def test_an_op_nobody_knows_keeps_element_types_of_what_keeps_them_and_no_shapes():
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Opaque", ["x"], ["u"], domain="vendor"),
             helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
             helper.make_node("Add", ["u", "t"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", f, [3, 3])], [helper.make_tensor_value_info("y", f, None)],
               opsets=(("", 17), ("vendor", 1)))
    g = Graph(m)
    assert g.elem("u") == 0 and g.dims("u") is None  # nothing says what Opaque makes
    assert g.elem("t") == f and g.dims("t") == [3, 3]


def test_leading_dims_are_proven_through_elementwise_ops_a_weight_and_last_axis_slices_only():
    """What inference leaves without dims after a Slice whose bounds it cannot fold: the leading dims walked back
    to a value that has them; a Slice of another axis, or a broadcast against unknown dims, proves nothing."""
    f = TensorProto.FLOAT
    ints = {"zero": [0], "last": [-1], "first": [0]}
    nodes = [helper.make_node("Constant", [], [k], value=numpy_helper.from_array(np.array(v, np.int64)))
             for k, v in ints.items()]
    nodes += [helper.make_node("Shape", ["x"], ["xs"]),
              helper.make_node("Gather", ["xs", "zero"], ["n"], axis=0),  # a bound inference does not fold
              helper.make_node("Slice", ["x", "zero", "n", "last"], ["cut"]),
              helper.make_node("Slice", ["x", "zero", "n", "first"], ["rows"]),
              helper.make_node("Erf", ["cut"], ["e"]),
              helper.make_node("Mul", ["e", "half"], ["scaled"]),  # by a scalar constant
              helper.make_node("Mul", ["scaled", "cut"], ["both"]),
              helper.make_node("Mul", ["scaled", "z"], ["mixed"]),  # z: (2, 1, ?) broadcasts into x's dims
              helper.make_node("MatMul", ["both", "w"], ["mm"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", f, [2, 3, 8]), helper.make_tensor_value_info("z", f, None)],
               [helper.make_tensor_value_info(v, f, None) for v in ("mm", "rows", "mixed")],
               [numpy_helper.from_array(np.float32(0.5), "half"), numpy_helper.from_array(np.ones((8, 4), np.float32),
                                                                                           "w")])
    g = Graph(m)
    assert g.dims("mm")[-1] == 4 and g.dims("both")[0] is None  # inference lost them at the Slice
    assert g.leading_dims("mm") == g.leading_dims("both") == g.leading_dims("cut") == (2, 3)
    assert g.leading_dims("rows") is None and g.leading_dims("mixed") is None



def test_proved_dims_follow_a_chunk_whose_bounds_const_folds_into_what_reads_it():
    """A chunk's Slice with bounds computed from a Shape (SD3's modulation, a GEGLU's halves): its dims, an
    Unsqueeze's, a broadcast's and a MatMul's after it are proved; bounds no constant gives, or a broadcast against
    a value of unknown dims, prove nothing."""
    f = TensorProto.FLOAT
    ints = {"one": [1], "three": [3], "two": [2], "axis1": [1]}
    nodes = [helper.make_node("Constant", [], [k], value=numpy_helper.from_array(np.array(v, np.int64)))
             for k, v in ints.items()]
    nodes += [helper.make_node("Shape", ["x"], ["xs"]),
              helper.make_node("Gather", ["xs", "one"], ["width"], axis=0),
              helper.make_node("Div", ["width", "three"], ["third"]),
              helper.make_node("Mul", ["third", "two"], ["two_thirds"]),
              helper.make_node("Slice", ["x", "third", "two_thirds", "axis1"], ["shift"]),
              helper.make_node("Unsqueeze", ["shift", "axis1"], ["shift3"]),
              helper.make_node("Add", ["y", "shift3"], ["moved"]),
              helper.make_node("Erf", ["moved"], ["e"]),
              helper.make_node("MatMul", ["e", "w"], ["mm"]),
              helper.make_node("Gemm", ["x", "v"], ["emb"], transB=1),
              helper.make_node("Cast", ["n"], ["bound"], to=TensorProto.INT64),
              helper.make_node("Slice", ["x", "one", "bound", "axis1"], ["open"]),
              helper.make_node("Add", ["shift3", "z"], ["mixed"])]
    m = _model(nodes, [helper.make_tensor_value_info("x", f, [2, 12]), helper.make_tensor_value_info("y", f, [2, 5, 4]),
                       helper.make_tensor_value_info("n", f, [1]), helper.make_tensor_value_info("z", f, None)],
               [helper.make_tensor_value_info(v, f, None) for v in ("mm", "emb", "open", "mixed")],
               [numpy_helper.from_array(np.ones((4, 6), np.float32), "w"),
                numpy_helper.from_array(np.ones((7, 12), np.float32), "v")])
    g = Graph(m)
    assert g.proved_dims("shift") == [2, 4] and g.proved_dims("shift3") == [2, 1, 4]
    assert g.proved_dims("moved") == g.proved_dims("e") == [2, 5, 4] and g.proved_dims("mm") == [2, 5, 6]
    assert g.proved_dims("emb") == [2, 7]
    assert g.proved_dims("open") is None and g.proved_dims("mixed") is None
