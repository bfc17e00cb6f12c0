"""rewrite/gelu.py: a Linear's GELU-tanh, as each exporter writes it, to ORT's FastGelu with the bias folded in,
where the measured table says so; numbers on the CPU EP (FastGelu's CPU kernel is float)."""

from __future__ import annotations

import math

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite  # noqa: E402

from tests.runtime.ortlib.rewrite.measured import measured_as  # noqa: E402

C, S = 16, 6
K = math.sqrt(2 / math.pi)


@pytest.fixture
def measured(monkeypatch):
    """The table as rows would make it where FastGelu measured faster than both forms in fp32."""
    measured_as(monkeypatch, "gelu", "fp32", {"decomposed": 2.0, "onnx_gelu": 1.2})


def _const(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.float32)))


def _model(form: str, order: str = "torchscript", bias_shape=(C,), extra_reader: bool = False):
    """x (1, S, C) -> MatMul W -> Add b -> GELU-tanh in `form` ("decomposed" in `order`, or "onnx_gelu")."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((C, C)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-1, 1, bias_shape).astype(np.float32), "b")]
    n = [helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Add", ["b", "mm"], ["h"])]
    if form == "onnx_gelu":
        n.append(helper.make_node("Gelu", ["h"], ["y"], approximate="tanh"))
    else:
        n += [_const("c_half", 0.5), _const("c_one", 1.0), _const("c_k", K), _const("c_cube", 0.044715)]
        if order == "pow":
            n += [_const("three", 3.0), helper.make_node("Pow", ["h", "three"], ["cu"])]
        else:
            n += [helper.make_node("Mul", ["h", "h"], ["sq"]), helper.make_node("Mul", ["h", "sq"], ["cu"])]
        n += [helper.make_node("Mul", ["c_cube", "cu"], ["a"]), helper.make_node("Add", ["h", "a"], ["s"]),
              helper.make_node("Mul", ["c_k", "s"], ["k"]), helper.make_node("Tanh", ["k"], ["t"]),
              helper.make_node("Add", ["c_one", "t"], ["o"])]
        if order == "half_first":  # (x * 0.5) * (1 + tanh)
            n += [helper.make_node("Mul", ["h", "c_half"], ["hh"]), helper.make_node("Mul", ["hh", "o"], ["y"])]
        else:
            n += [helper.make_node("Mul", ["h", "o"], ["m"]), helper.make_node("Mul", ["c_half", "m"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, C])]
    if extra_reader:
        n.append(helper.make_node("Sigmoid", ["h"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, S, C]))
    g = helper.make_graph(n, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, C])], outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20 if form == "onnx_gelu" else 17)],
                             ir_version=9)


def _run(model, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if lib:
        so.register_custom_ops_library(str(lib))
    x = np.random.default_rng(1).standard_normal((1, S, C)).astype(np.float32)
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _ops(model):
    return sorted(f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in model.graph.node)


@pytest.mark.parametrize("form,order", [("decomposed", "torchscript"), ("decomposed", "half_first"),
                                        ("decomposed", "pow"), ("onnx_gelu", "")])
def test_each_form_becomes_one_fast_gelu_with_the_bias_and_computes_the_same(ort_library, measured, form, order):
    model = _model(form, order)
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"FastGelu": 1}, report.lines()
    assert _ops(model) == ["MatMul", "com.microsoft.FastGelu"]
    fast = next(n for n in model.graph.node if n.op_type == "FastGelu")
    assert list(fast.input) == ["mm", "b"] and list(fast.output) == ["y"]
    np.testing.assert_allclose(_run(model, ort_library)[0], want[0], rtol=1e-5, atol=1e-5)


def test_a_bias_read_elsewhere_stays_an_add_and_fast_gelu_takes_its_sum(ort_library, measured):
    model = _model("decomposed", extra_reader=True)
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"FastGelu": 1}, report.lines()
    fast = next(n for n in model.graph.node if n.op_type == "FastGelu")
    assert list(fast.input) == ["h"]
    for a, b in zip(_run(model, ort_library), want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_a_bias_of_rank_three_is_passed_one_dimensional(ort_library, measured):
    model = _model("decomposed", bias_shape=(1, 1, C))
    want = _run(model)
    rewrite(model, ort_library)
    fast = next(n for n in model.graph.node if n.op_type == "FastGelu")
    bias = next(t for t in model.graph.initializer if t.name == fast.input[1])
    assert list(bias.dims) == [C]
    np.testing.assert_allclose(_run(model, ort_library)[0], want[0], rtol=1e-5, atol=1e-5)


def test_an_unmeasured_dtype_keeps_the_exports_nodes_and_says_so(ort_library, monkeypatch):
    measured_as(monkeypatch, "gelu", "fp32", None)
    model = _model("decomposed")
    before = _ops(model)
    report = rewrite(model, ort_library)
    assert not report.rewritten and _ops(model) == before
    said = "FastGelu was not measured against the export's decomposed form in fp32"
    assert any(said in why for why in report.left), report.left


def test_a_form_that_measured_slower_is_left_with_the_number(ort_library, monkeypatch):
    measured_as(monkeypatch, "gelu", "fp32", {"decomposed": 0.8})
    report = rewrite(_model("decomposed"), ort_library)
    assert not report.rewritten
    assert any("measured faster than ORT's FastGelu (0.80x" in why for why in report.left), report.left


def test_a_gelu_without_a_bias_add_and_the_exact_gelu_are_not_its_business(ort_library, measured):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, C])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, C])
    for approximate in ("tanh", "none"):
        g = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)], "g", [x], [y])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
        report = rewrite(model, ort_library)
        assert not report.rewritten and not report.left, report.lines()


def test_a_tanh_that_is_not_a_gelu_is_left_alone(ort_library, measured):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, C])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, C])
    g = helper.make_graph([helper.make_node("Tanh", ["x"], ["y"])], "g", [x], [y])
    report = rewrite(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), ort_library)
    assert not report.rewritten and not report.left
