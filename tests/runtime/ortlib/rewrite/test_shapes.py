"""rewrite/shapes.py: a Shape of a Linear's MatMul + bias reads the MatMul; any other Shape stays."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.graph import Graph  # noqa: E402
from tritonforge.runtime.ortlib.rewrite.shapes import shapes_past_bias  # noqa: E402


def _model(bias_shape=(8,), const=True):
    """y = Reshape(x @ W + b, Shape(x @ W + b)) * 1, as the dynamic TorchScript export splits heads by the
    projection's own shape; `const`: b an initializer, else an input."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 8)).astype(np.float32), "w")]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])]
    if const:
        inits.append(numpy_helper.from_array(rng.standard_normal(bias_shape).astype(np.float32), "b"))
    else:
        ins.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, list(bias_shape)))
    n = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["lin"]),
         helper.make_node("Shape", ["lin"], ["shape"]), helper.make_node("Reshape", ["lin", "shape"], ["y"])]
    g = helper.make_graph(n, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 8])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _run(model):
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)}
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    if len(sess.get_inputs()) > 1:
        feeds["b"] = np.ones([d for d in sess.get_inputs()[1].shape], np.float32)
    return sess.run(None, feeds)[0]


def test_the_shape_of_a_linears_output_is_the_matmuls():
    model = _model()
    want = _run(model)
    assert shapes_past_bias(Graph(model)) == 1
    (shape,) = [n for n in model.graph.node if n.op_type == "Shape"]
    assert list(shape.input) == ["mm"]
    onnx.checker.check_model(model)
    np.testing.assert_array_equal(_run(model), want)


@pytest.mark.parametrize("case", [{"bias_shape": (3, 8)}, {"const": False}])
def test_an_add_that_may_change_the_shape_or_is_no_constant_bias_keeps_its_shape(case):
    """A (3, 8) addend could broadcast a smaller projection up; an input's values and shape are not the model's."""
    model = _model(**case)
    assert shapes_past_bias(Graph(model)) == 0
    (shape,) = [n for n in model.graph.node if n.op_type == "Shape"]
    assert list(shape.input) == ["lin"]
