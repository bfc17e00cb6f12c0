"""rewrite/linear.py: a Linear's MatMul and bias Add, with the GELU-tanh after it as each exporter and ORT's optimizer
write it, to one tritonforge.Linear where the measured table says so, after the fusions that take a Linear's bias
themselves; numbers on the CPU EP equal the export's."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import choices, rewrite, rewrite_file  # noqa: E402

from tests.runtime.ortlib.rewrite.measured import measured_as  # noqa: E402

from .test_rewrite import DIT_GELUS, EXPORTS, TOL, _dit_feeds, _ops, _rel, session  # noqa: E402

K, N, S = 16, 24, 6


@pytest.fixture
def measured(monkeypatch):
    """The table as rows would make it where the Linear measured faster with either epilogue in every dtype."""
    for dtype in ("fp32", "fp16", "bf16"):
        measured_as(monkeypatch, "linear", dtype, {"none": 1.5, "gelu_tanh": 1.8})


def _const(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.float32)))


def _model(gelu: str = "", shape_reader: bool = False):
    """x (2, S, K) -> MatMul W (K, N) -> Add b -> [GELU-tanh as `gelu`: "onnx", "decomposed" or "fast_gelu" (ORT's,
    the bias in it)] -> y; `shape_reader`: a Shape of the MatMul (as shapes.py leaves TorchScript's head splits)."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((K, N)) / 4).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-1, 1, N).astype(np.float32), "b")]
    n = [helper.make_node("MatMul", ["x", "W"], ["mm"], name="/blocks.0/ff/net.0/proj/MatMul")]
    h = "h"
    if gelu == "fast_gelu":
        n.append(helper.make_node("FastGelu", ["mm", "b"], ["y"], domain="com.microsoft", name="gelu"))
    else:
        n.append(helper.make_node("Add", ["b", "mm"], [h]))
    if gelu == "onnx":
        n.append(helper.make_node("Gelu", [h], ["y"], approximate="tanh"))
    elif gelu == "decomposed":
        n += [_const("c_half", 0.5), _const("c_one", 1.0), _const("c_k", math.sqrt(2 / math.pi)),
              _const("c_cube", 0.044715), helper.make_node("Mul", [h, h], ["sq"]),
              helper.make_node("Mul", [h, "sq"], ["cu"]), helper.make_node("Mul", ["c_cube", "cu"], ["a"]),
              helper.make_node("Add", [h, "a"], ["s"]), helper.make_node("Mul", ["c_k", "s"], ["k"]),
              helper.make_node("Tanh", ["k"], ["t"]), helper.make_node("Add", ["c_one", "t"], ["o"]),
              helper.make_node("Mul", [h, "o"], ["m"]), helper.make_node("Mul", ["c_half", "m"], ["y"])]
    elif not gelu:
        n.append(helper.make_node("Relu", [h], ["y"]))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, S, N])]
    if shape_reader:
        n.append(helper.make_node("Shape", ["mm"], ["dims"], start=-1))
        outputs.append(helper.make_tensor_value_info("dims", TensorProto.INT64, [1]))
    g = helper.make_graph(n, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, S, K])], outputs, inits)
    opsets = [helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(g, opset_imports=opsets, ir_version=9)


def _run(model, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if lib:
        so.register_custom_ops_library(str(lib))
    x = np.random.default_rng(1).standard_normal((2, S, K)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})


def _nodes(model):
    return Counter(f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in model.graph.node)


@pytest.mark.parametrize("gelu,activation", [("", "none"), ("onnx", "gelu_tanh"), ("decomposed", "gelu_tanh"),
                                             ("fast_gelu", "gelu_tanh")])
def test_each_form_becomes_one_linear_that_computes_the_same(ort_library, measured, monkeypatch, gelu, activation):
    # FastGelu measured faster too: the GELU still goes into the Linear's epilogue, not into a FastGelu of its own
    measured_as(monkeypatch, "gelu", "fp32", {"decomposed": 2.0, "onnx_gelu": 1.2})
    model = _model(gelu)
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"Linear": 1}, report.lines()
    (node,) = [n for n in model.graph.node if n.op_type == "Linear"]
    assert node.domain == "tritonforge" and node.name == "/blocks.0/ff/net.0/proj/Linear"
    assert helper.get_attribute_value(node.attribute[0]) == activation.encode()
    assert list(node.input[:2]) == ["x", "W"] and _nodes(model) == Counter({"tritonforge.Linear": 1, **(
        {"Relu": 1} if not gelu else {})}), _nodes(model)
    onnx.checker.check_model(model)
    np.testing.assert_allclose(_run(model, ort_library)[0], want[0], rtol=1e-5, atol=1e-5)


def test_a_shape_of_the_matmul_reads_the_linear_which_has_its_shape(ort_library, measured):
    model = _model("onnx", shape_reader=True)
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"Linear": 1}, report.lines()
    ops = _nodes(model)
    assert ops == Counter({"tritonforge.Linear": 1, "Shape": 1}), ops
    (lin,) = [n for n in model.graph.node if n.op_type == "Linear"]
    (shape,) = [n for n in model.graph.node if n.op_type == "Shape"]
    assert shape.input[0] == lin.output[0] and helper.get_attribute_value(shape.attribute[0]) == -1
    for g, w in zip(_run(model, ort_library), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_without_rows_the_export_keeps_its_nodes_and_the_report_says_so_once(ort_library, monkeypatch):
    measured_as(monkeypatch, "linear", "fp32", {"none": 0.9})
    model = _model()
    report = rewrite(model, ort_library)
    assert not report.rewritten and not report.left
    assert report.notes == {"the export's nodes measured faster than the library's Linear (0.90x, bias epilogue, fp32, "
                            f"{choices.table('linear').device})": 1}, report.lines()
    # the bias epilogue measured, the GELU's not, and no FastGelu either: the Linear takes the bias, the GELU stays
    measured_as(monkeypatch, "linear", "fp32", {"none": 1.5})
    measured_as(monkeypatch, "gelu", "fp32", {})
    model = _model("decomposed")
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"Linear": 1} and _nodes(model)["Tanh"] == 1, report.lines()
    assert report.sources == {("Linear", "MatMul + bias Add"): 1}
    np.testing.assert_allclose(_run(model, ort_library)[0], want[0], rtol=1e-5, atol=1e-5)
    # the GELU epilogue unmeasured: the GELU and the bias go to ORT's FastGelu where that measured faster (gelu.py)
    measured_as(monkeypatch, "gelu", "fp32", {"onnx_gelu": 1.2})
    model = _model("onnx")
    report = rewrite(model, ort_library)
    assert report.rewritten == {"FastGelu": 1} and not report.notes, report.lines()
    assert _nodes(model) == Counter({"MatMul": 1, "com.microsoft.FastGelu": 1})


@pytest.mark.parametrize("name", ["sd3_medium_tiny.torchscript.fp32.onnx", "flux_dev_tiny.dynamo23.fp16.onnx",
                                  "sd3_medium_tiny.torchscript.dynamic.fp16.onnx"])
def test_a_diffusion_transformers_linears_go_to_the_library_after_the_other_fusions(ort_library, measured, tmp_path,
                                                                                    name):
    """Every MatMul + bias of the blocks that no other fusion took is one Linear, each MLP's GELU-tanh in its
    epilogue, with either exporter and dynamic axes; the numbers are the export's."""
    model, dtype = name.split("_tiny")[0], name.split(".")[-2]
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    before = _ops(src)
    report = rewrite_file(src, dst, ort_library)
    after = _ops(dst)
    linears = before[("", "MatMul")] - after[("", "MatMul")] - 2 * report.rewritten["MultiHeadAttention"] * (
        ".dynamo23." not in name)  # the decomposed attention's two MatMuls went into its node
    assert report.rewritten["Linear"] == after[("tritonforge", "Linear")] == linears > 0, report.lines()
    assert report.sources[("Linear", "MatMul + bias Add + GELU-tanh")] == DIT_GELUS[model], report.lines()
    assert not after[("com.microsoft", "FastGelu")] and not after[("", "Tanh")] and not after[("", "Gelu")]
    theirs, ours = session(src), session(dst, ort_library)
    for batch, grid in ((2, 4), (1, 3)) if ".dynamic." in name else ((2, 4),):
        feeds = _dit_feeds(theirs, batch + grid, batch, grid)
        want, got = theirs.run(None, feeds)[0], ours.run(None, feeds)[0]
        assert got.shape == want.shape and _rel(want, got) < TOL[dtype], (batch, grid)
