"""rewrite/skip_layer_norm.py: a Linear's bias, the residual Add and the LayerNorm after them to ORT's
SkipLayerNormalization, where the measured table says so; numbers on the CPU EP (its SkipLayerNormalization
kernel runs float and float16)."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import choices, rewrite  # noqa: E402

from tests.runtime.ortlib.rewrite.measured import measured_as  # noqa: E402

C, S = 16, 6
NP = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}


@pytest.fixture(autouse=True)
def no_affine_form(monkeypatch):
    """The LayerNormalization alone in the library's AdaLayerNorm (its `affine` form) left out of the tables: these
    tests are about what SkipLayerNormalization takes or leaves; the one that has both sets the form itself."""
    for dtype, forms in list(choices.table("ada_layer_norm").speedup.items()):
        measured_as(monkeypatch, "ada_layer_norm", dtype, {k: v for k, v in forms.items() if k != "affine"})


@pytest.fixture
def measured(monkeypatch):
    """The table as rows would make it where the fused node measured faster in fp32 and fp16."""
    for dtype in ("fp32", "fp16"):
        measured_as(monkeypatch, "skip_layer_norm", dtype, {"export": 1.5})


def _model(elem=TensorProto.FLOAT, order="bias_first", div_one=False, sum_read=True, bias_read=False,
           affine=True):
    """x (1, S, C) -> MatMul W -> Add b [-> Div 1] -> Add residual r -> LayerNormalization -> y; the sum `s` a
    graph output where `sum_read` (the next block's residual)."""
    rng = np.random.default_rng(0)
    t = NP[elem]
    inits = [numpy_helper.from_array(rng.standard_normal((C, C)).astype(t), "W"),
             numpy_helper.from_array(rng.uniform(-1, 1, C).astype(t), "b"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, C).astype(t) if affine else np.ones(C, t), "gamma"),
             numpy_helper.from_array(rng.uniform(-1, 1, C).astype(t) if affine else np.zeros(C, t), "beta"),
             numpy_helper.from_array(np.array(1, t), "one")]
    n = [helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"])]
    branch = "h"
    if div_one:
        n.append(helper.make_node("Div", ["h", "one"], ["hd"]))
        branch = "hd"
    n.append(helper.make_node("Add", [branch, "r"] if order == "bias_first" else ["r", branch], ["s"]))
    n.append(helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5))
    outputs = [helper.make_tensor_value_info("y", elem, [1, S, C])]
    if sum_read:
        outputs.append(helper.make_tensor_value_info("s", elem, [1, S, C]))
    if bias_read:
        n.append(helper.make_node("Sigmoid", ["h"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", elem, [1, S, C]))
    x = [helper.make_tensor_value_info(v, elem, [1, S, C]) for v in ("x", "r")]
    g = helper.make_graph(n, "g", x, outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def _run(model, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if lib:
        so.register_custom_ops_library(str(lib))
    elem = model.graph.input[0].type.tensor_type.elem_type
    rng = np.random.default_rng(1)
    feeds = {v: rng.standard_normal((1, S, C)).astype(NP[elem]) for v in ("x", "r")}
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _ops(model):
    return sorted(f"{n.domain}.{n.op_type}" if n.domain else n.op_type for n in model.graph.node)


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.FLOAT16])
@pytest.mark.parametrize("order,div_one", [("bias_first", False), ("residual_first", False), ("bias_first", True)])
def test_each_form_becomes_one_skip_layer_norm_with_the_bias_and_computes_the_same(ort_library, measured, elem,
                                                                                   order, div_one):
    model = _model(elem, order, div_one)
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"SkipLayerNormalization": 1}, report.lines()
    assert _ops(model) == ["MatMul", "com.microsoft.SkipLayerNormalization"]
    node = model.graph.node[1]
    # input, skip, gamma, beta, bias; the norm under its name, the sum (output 3) under its own
    assert list(node.input) == ["mm", "r", "gamma", "beta", "b"] and list(node.output) == ["y", "", "", "s"]
    got = _run(model, ort_library)
    tol = 1e-5 if elem == TensorProto.FLOAT else 2e-2
    for name in ("y", "s"):
        np.testing.assert_allclose(got[name].astype(np.float64), want[name].astype(np.float64), rtol=tol, atol=tol)


def test_a_sum_nothing_else_reads_is_not_an_output(ort_library, measured):
    model = _model(sum_read=False)
    want = _run(model)
    rewrite(model, ort_library)
    node = model.graph.node[1]
    assert node.op_type == "SkipLayerNormalization" and list(node.output) == ["y"]
    np.testing.assert_allclose(_run(model, ort_library)["y"], want["y"], rtol=1e-5, atol=1e-5)


def test_a_bias_read_elsewhere_keeps_the_export_and_says_why(ort_library, measured):
    model = _model(bias_read=True)
    before = _ops(model)
    report = rewrite(model, ort_library)
    assert not report.rewritten and _ops(model) == before
    assert any("bias Add before the residual is read elsewhere too" in why for why in report.left), report.left


def test_a_layer_norm_after_a_bias_add_alone_is_not_its_business(ort_library, measured):
    """The norm after a Linear with no residual (the UNet block's first, after proj_in): ORT's LayerNorm."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((C, C)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.uniform(-1, 1, C).astype(np.float32), "b"),
             numpy_helper.from_array(np.ones(C, np.float32), "gamma")]
    n = [helper.make_node("MatMul", ["x", "W"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"]),
         helper.make_node("LayerNormalization", ["h", "gamma"], ["y"], axis=-1)]
    g = helper.make_graph(n, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, C])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, C])], inits)
    report = rewrite(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), ort_library)
    assert not report.rewritten and not report.left, report.lines()


def test_an_unmeasured_dtype_keeps_the_exports_nodes_and_says_so(ort_library, monkeypatch):
    measured_as(monkeypatch, "skip_layer_norm", "fp32", None)
    model = _model()
    before = _ops(model)
    report = rewrite(model, ort_library)
    assert not report.rewritten and _ops(model) == before
    said = "SkipLayerNormalization was not measured against the export's export form in fp32"
    assert any(said in why for why in report.left), report.left


def test_a_dtype_that_measured_slower_is_left_with_the_number(ort_library, monkeypatch):
    measured_as(monkeypatch, "skip_layer_norm", "fp32", {"export": 0.9})
    report = rewrite(_model(), ort_library)
    assert not report.rewritten
    assert any("measured faster than ORT's SkipLayerNormalization (0.90x" in why for why in report.left), report.left


def test_with_the_affine_form_measured_too_the_norm_after_a_residual_stays_the_fused_nodes(ort_library, measured,
                                                                                          monkeypatch):
    measured_as(monkeypatch, "ada_layer_norm", "fp32", {"affine": 1.5})
    report = rewrite(_model(), ort_library)
    assert report.rewritten == {"SkipLayerNormalization": 1}, report.lines()


def test_where_the_fused_node_measured_slower_the_affine_form_takes_the_norm_alone(ort_library, monkeypatch):
    measured_as(monkeypatch, "skip_layer_norm", "fp32", {"export": 0.9})
    measured_as(monkeypatch, "ada_layer_norm", "fp32", {"affine": 1.5})
    model = _model()
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"AdaLayerNorm": 1}, report.lines()
    assert _ops(model) == ["Add", "Add", "MatMul", "tritonforge.AdaLayerNorm"]
    got = _run(model, ort_library)
    for name in ("y", "s"):
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


def _geglu_block(slice_axis: int = -1):
    """SDXL's transformer block after its first: x (2, S, C) -> MatMul W1 + b1 -> GEGLU halves by Slices whose
    bounds TorchScript computes from Shape (inference leaves the halves, and all after them, without dims) ->
    erf GELU -> MatMul W2 + b2 -> Add residual x -> LayerNormalization; the sum an output (the next residual)."""
    import math

    rng = np.random.default_rng(0)

    def const(name, v, dtype=np.float32):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, dtype)))

    inits = [numpy_helper.from_array((rng.standard_normal((C, 4 * C)) / 4).astype(np.float32), "W1"),
             numpy_helper.from_array(rng.uniform(-1, 1, 4 * C).astype(np.float32), "b1"),
             numpy_helper.from_array((rng.standard_normal((2 * C, C)) / 4).astype(np.float32), "W2"),
             numpy_helper.from_array(rng.uniform(-1, 1, C).astype(np.float32), "b2"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, C).astype(np.float32), "gamma"),
             numpy_helper.from_array(rng.uniform(-1, 1, C).astype(np.float32), "beta")]
    n = [helper.make_node("MatMul", ["x", "W1"], ["mm1"]), helper.make_node("Add", ["mm1", "b1"], ["h"]),
         const("zero", [0], np.int64), const("axis", [slice_axis], np.int64),
         helper.make_node("Shape", ["h"], ["shape"]), const("minus1", -1, np.int64),
         helper.make_node("Gather", ["shape", "minus1"], ["dim"], axis=0), const("one_i", [1], np.int64),
         const("two_i", [2], np.int64), helper.make_node("Add", ["dim", "one_i"], ["dim1"]),
         helper.make_node("Div", ["dim1", "two_i"], ["half"]), helper.make_node("Mul", ["half", "one_i"], ["end_a"]),
         helper.make_node("Mul", ["half", "two_i"], ["end_v"]),
         helper.make_node("Slice", ["h", "zero", "end_a", "axis"], ["a"]),
         helper.make_node("Slice", ["h", "end_a", "end_v", "axis"], ["v"]),
         const("sqrt2", math.sqrt(2)), const("one", 1.0), const("half_c", 0.5),
         helper.make_node("Div", ["v", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
         helper.make_node("Add", ["e", "one"], ["o"]), helper.make_node("Mul", ["v", "o"], ["m"]),
         helper.make_node("Mul", ["m", "half_c"], ["g"]), helper.make_node("Mul", ["a", "g"], ["ff"]),
         helper.make_node("MatMul", ["ff", "W2"], ["mm2"]), helper.make_node("Add", ["mm2", "b2"], ["f"]),
         helper.make_node("Add", ["f", "x"], ["s"]),
         helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-5)]
    g = helper.make_graph(n, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, S, C])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, S, C]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, S, C])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_the_norm_after_a_geglu_mlp_whose_output_inference_left_without_dims_is_taken(ort_library, measured):
    """The MatMul after the GEGLU has dims (None, None, C): its leading dims are proven through the GELU and the
    last-axis Slices back to the first Linear's, so the norm goes to SkipLayerNormalization as the first's do."""
    from tritonforge.runtime.ortlib.rewrite.graph import Graph

    model = _geglu_block()
    assert Graph(model).dims("mm2") == [None, None, C]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, S, C)).astype(np.float32)

    def run(m, lib=None):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        if lib:
            so.register_custom_ops_library(str(lib))
        return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})

    want = run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten["SkipLayerNormalization"] == 1, report.lines()
    skip = next(n for n in model.graph.node if n.op_type == "SkipLayerNormalization")
    assert list(skip.input) == ["mm2", "x", "gamma", "beta", "b2"] and list(skip.output) == ["y", "", "", "s"]
    for got, ref in zip(run(model, ort_library), want):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_halves_sliced_on_another_axis_prove_nothing_and_the_norm_stays(ort_library, measured):
    model = _geglu_block(slice_axis=1)
    report = rewrite(model, ort_library)
    assert "SkipLayerNormalization" not in report.rewritten
    assert any("the Linear's output is not of X's shape [2, 6, 16]" in why for why in report.left), report.left

