"""rewrite/ada_layer_norm.py: a modulated LayerNorm, and the gated residual before it, to the library's
AdaLayerNorm where the measured table says so; numbers on the CPU EP (the library's CPU op)."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite  # noqa: E402

from tests.runtime.ortlib.rewrite.measured import measured_as  # noqa: E402

B, S, C = 2, 5, 16


@pytest.fixture
def measured(monkeypatch):
    """The table as rows make it where the library's node measured faster in fp32, both forms."""
    measured_as(monkeypatch, "ada_layer_norm", "fp32", {"gated": 3.0, "gated_bias": 3.0, "plain": 3.0})


def _c(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v)))


def _model(factor="unsqueeze_then_add", gated=False, affine=False, shift_late=True, linear=False, clip=None):
    """x (B, S, C) [+ gate * branch] -> LayerNormalization -> * (1 + scale) -> + shift; scale, shift and gate
    sliced from emb (B, 3C) as DiTs chunk their conditioning. `shift_late`: the shift's nodes come after the norm
    in the graph (dynamo's order). `linear`: the branch is a Linear of br, MatMul + bias, as exported. `clip`: the
    sum clipped to (lo, hi) before the norm and the next block read it (fp16 Flux's residual stream)."""
    n = [_c("ones", np.full(C, 1.5 if affine else 1.0, np.float32)), _c("zeros", np.zeros(C, np.float32)),
         _c("one", np.float32(1.0)), _c("ax1", np.array([1], np.int64)), _c("ax_last", np.array([1], np.int64))]
    for k, what in enumerate(("scale", "shift", "gate")):
        n += [_c(f"{what}_lo", np.array([k * C])), _c(f"{what}_hi", np.array([(k + 1) * C])),
              helper.make_node("Slice", ["emb", f"{what}_lo", f"{what}_hi", "ax_last"], [f"{what}2"])]
    x = "x"
    if gated:
        branch = "br"
        if linear:
            rng = np.random.default_rng(5)
            n += [_c("w_out", rng.standard_normal((C, C)).astype(np.float32) / 4),
                  _c("b_out", rng.standard_normal(C).astype(np.float32)),
                  helper.make_node("MatMul", ["br", "w_out"], ["mm"]),
                  helper.make_node("Add", ["mm", "b_out"], ["lin"])]
            branch = "lin"
        n += [helper.make_node("Unsqueeze", ["gate2", "ax1"], ["gate3"]),
              helper.make_node("Mul", ["gate3", branch], ["gb"]), helper.make_node("Add", ["x", "gb"], ["res"])]
        x = "res"
        if clip:
            n += [_c("lo", np.float32(clip[0])), _c("hi", np.float32(clip[1])),
                  helper.make_node("Clip", ["res", "lo", "hi"], ["resc"])]
            x = "resc"
    if factor == "unsqueeze_then_add":
        n += [helper.make_node("Unsqueeze", ["scale2", "ax1"], ["scale3"]),
              helper.make_node("Add", ["scale3", "one"], ["factor"])]
    else:  # (scale + 1)[:, None]
        n += [helper.make_node("Add", ["scale2", "one"], ["scale1"]),
              helper.make_node("Unsqueeze", ["scale1", "ax1"], ["factor"])]
    shift = [helper.make_node("Unsqueeze", ["shift2", "ax1"], ["shift3"])]
    norm = [helper.make_node("LayerNormalization", [x, "ones", "zeros"], ["ln"], axis=-1, epsilon=1e-6, name="norm"),
            helper.make_node("Mul", ["ln", "factor"], ["m"])]
    n += norm + shift if shift_late else shift + norm
    n.append(helper.make_node("Add", ["m", "shift3"], ["y"]))
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, S, C])]
    if gated:  # the residual stream goes on: the next block reads it
        n.append(helper.make_node("Mul", [x, "one"], ["z"]))
        outs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [B, S, C]))
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, C]),
           helper.make_tensor_value_info("emb", TensorProto.FLOAT, [B, 3 * C])]
    if gated:
        ins.append(helper.make_tensor_value_info("br", TensorProto.FLOAT, [B, S, C]))
    m = helper.make_model(helper.make_graph(n, "g", ins, outs), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


def _run(model, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if lib:
        so.register_custom_ops_library(str(lib))
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((B, S, C)).astype(np.float32),
             "emb": rng.standard_normal((B, 3 * C)).astype(np.float32),
             "br": rng.standard_normal((B, S, C)).astype(np.float32)}
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, {i.name: feeds[i.name] for i in s.get_inputs()})


def _run_x(model, x, lib=None):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if lib:
        so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _ops(model):
    return [n.op_type for n in model.graph.node if n.op_type in ("LayerNormalization", "AdaLayerNorm", "Mul", "Add")]


@pytest.mark.parametrize("factor", ["unsqueeze_then_add", "add_then_unsqueeze"])
@pytest.mark.parametrize("gated", [False, True])
def test_the_norm_and_its_modulation_become_one_node_that_computes_the_same(ort_library, measured, factor, gated):
    model = _model(factor, gated)
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"AdaLayerNorm": 1}, report.lines()
    node = next(n for n in model.graph.node if n.op_type == "AdaLayerNorm")
    assert len(node.input) == (5 if gated else 3) and list(node.output) == (["y", "res"] if gated else ["y"])
    assert "LayerNormalization" not in _ops(model)
    onnx.checker.check_model(model)  # the node reads the shift made after the norm's place: the order is mended
    for got, exp in zip(_run(model, ort_library), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)


def test_a_norm_with_an_affine_is_left_with_the_reason(ort_library, measured):
    report = rewrite(_model(affine=True), ort_library)
    assert not report.rewritten
    assert any("the norm has an affine" in why for why in report.left), report.left


def test_an_unmeasured_dtype_keeps_the_exports_nodes_and_says_so(ort_library, monkeypatch):
    measured_as(monkeypatch, "ada_layer_norm", "fp32", None)
    model = _model(gated=True)
    before = _ops(model)
    report = rewrite(model, ort_library)
    assert not report.rewritten and _ops(model) == before
    said = "AdaLayerNorm was not measured against the export's gated form in fp32"
    assert any(said in why for why in report.left), report.left


def _affine_norms(elem=TensorProto.FLOAT, dims=(B, S, C), weight_const=True):
    """Two LayerNormalizations of a constant affine (a UNet block's norm1), one without a bias."""
    t = helper.tensor_dtype_to_np_dtype(elem)
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, C).astype(t), "w"),
             numpy_helper.from_array(rng.uniform(-1, 1, C).astype(t), "b")]
    ins = [helper.make_tensor_value_info("x", elem, list(dims))]
    if not weight_const:
        ins.append(helper.make_tensor_value_info("w", elem, [C]))
        inits = inits[1:]
    n = [helper.make_node("LayerNormalization", ["x", "w", "b"], ["y"], axis=-1, epsilon=1e-5, name="norm1"),
         helper.make_node("LayerNormalization", ["x", "w"], ["y2"], axis=len(dims) - 1, name="norm2")]
    outs = [helper.make_tensor_value_info(v, elem, list(dims)) for v in ("y", "y2")]
    return helper.make_model(helper.make_graph(n, "g", ins, outs, inits), opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=9)


@pytest.mark.parametrize("dims", [(B, S, C), (B * S, C)])
def test_a_norm_of_a_constant_affine_becomes_the_node_with_the_affine_as_its_modulation(ort_library, monkeypatch,
                                                                                        dims):
    measured_as(monkeypatch, "ada_layer_norm", "fp32", {"affine": 1.5})
    model = _affine_norms(dims=dims)
    x = np.random.default_rng(3).standard_normal(dims).astype(np.float32)
    want = _run_x(model, x)
    w = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == "w"))
    report = rewrite(model, ort_library)
    assert report.rewritten == {"AdaLayerNorm": 2}, report.lines()
    assert [n.op_type for n in model.graph.node] == ["AdaLayerNorm", "AdaLayerNorm"]
    assert [n.name for n in model.graph.node] == ["norm1", "norm2"]  # each in its norm's place
    scale = numpy_helper.to_array(next(i for i in model.graph.initializer if i.name == model.graph.node[0].input[1]))
    np.testing.assert_array_equal(scale, w - 1)  # exact: the weights lie within [0.5, 2]
    for got, exp in zip(_run_x(model, x, ort_library), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)


def test_the_affine_is_written_in_x_s_own_type(ort_library, monkeypatch):
    """bf16: scale and shift as bfloat16 initializers beside X (the CPU EP runs no bfloat16 LayerNormalization, so
    the numbers are the fp32 test's)."""
    measured_as(monkeypatch, "ada_layer_norm", "bf16", {"affine": 1.5})
    model = _affine_norms(TensorProto.BFLOAT16)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"AdaLayerNorm": 2}, report.lines()
    types = {i.name: i.data_type for i in model.graph.initializer}
    assert {types[v] for n in model.graph.node for v in n.input[1:]} == {TensorProto.BFLOAT16}


def test_an_unmeasured_affine_form_keeps_the_norms_and_says_so_once(ort_library, measured):
    model = _affine_norms()
    report = rewrite(model, ort_library)
    assert not report.rewritten and not report.left
    said = [line for line in report.lines() if "not measured against the export's affine form in fp32" in line]
    assert len(said) == 1 and "(2 node(s))" in said[0], report.lines()


def test_a_norm_whose_weight_is_not_a_constant_is_not_its_business(ort_library, monkeypatch):
    measured_as(monkeypatch, "ada_layer_norm", "fp32", {"affine": 1.5})
    report = rewrite(_affine_norms(weight_const=False), ort_library)
    assert not report.rewritten and not report.left and not report.notes


def test_a_linear_branchs_bias_goes_into_the_node_and_its_matmul_stays(ort_library, measured):
    model = _model(gated=True, linear=True)
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"AdaLayerNorm": 1}, report.lines()
    node = next(n for n in model.graph.node if n.op_type == "AdaLayerNorm")
    assert list(node.input)[3:] == ["mm", "gate3", "b_out"]
    # the bias, residual, 1 + scale and shift Adds all went into the node
    assert [n.op_type for n in model.graph.node if n.op_type in ("MatMul", "Add")] == ["MatMul"]
    onnx.checker.check_model(model)
    for got, exp in zip(_run(model, ort_library), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)


def test_an_unmeasured_bias_form_keeps_the_bias_add_and_says_why(ort_library, measured, monkeypatch):
    measured_as(monkeypatch, "ada_layer_norm", "fp32", {"gated": 3.0, "plain": 3.0})
    model = _model(gated=True, linear=True)
    want = _run(model)
    report = rewrite(model, ort_library)
    node = next(n for n in model.graph.node if n.op_type == "AdaLayerNorm")
    assert list(node.input)[3:] == ["lin", "gate3"]
    assert any("the branch's bias stays a node of its own" in line and "gated_bias form" in line
               for line in report.lines()), report.lines()
    for got, exp in zip(_run(model, ort_library), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)


def test_a_clip_of_the_gated_sum_goes_into_the_node_with_its_bounds(ort_library, measured):
    """fp16 Flux clips its residual stream to fp16's range after each single block: the node clips the sum it
    writes, under the Clip's name, and normalises the clipped sum."""
    model = _model(gated=True, linear=True, clip=(-1.5, 2.0))
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"AdaLayerNorm": 1}, report.lines()
    node = next(n for n in model.graph.node if n.op_type == "AdaLayerNorm")
    assert list(node.output) == ["y", "resc"] and "Clip" not in {n.op_type for n in model.graph.node}
    assert {a.name: a.f for a in node.attribute if a.name.startswith("clip")} == {"clip_min": -1.5, "clip_max": 2.0}
    onnx.checker.check_model(model)
    for got, exp in zip(_run(model, ort_library), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)
    assert want[1].min() == -1.5 and want[1].max() == 2.0  # the bounds cut into the sum


def test_a_clip_of_a_plain_norms_input_stays_a_node_of_its_own(ort_library, measured):
    """Without a gated residual before it there is no sum for the node to clip: the Clip stays, the norm goes."""
    model = _model(gated=True, clip=(-1.5, 2.0))
    res = next(n for n in model.graph.node if n.output[0] == "res")
    res.op_type = "Sub"  # x - gb: not the gated residual
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"AdaLayerNorm": 1} and "Clip" in {n.op_type for n in model.graph.node}
    for got, exp in zip(_run(model, ort_library), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)
