"""rewrite/rotary_embedding.py: a rotary embedding on interleaved pairs to the library's RotaryEmbedding where the
measured table says so, in each way torch.onnx unbinds the pairs; numbers on the CPU EP (the library's CPU op)."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import choices, rewrite  # noqa: E402

from tests.runtime.ortlib.rewrite.measured import measured_as  # noqa: E402

B, S, H, D = 2, 6, 3, 8
NP = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}


@pytest.fixture
def measured(monkeypatch):
    """The table as rows make it where the library's node measured faster, fp32 and fp16."""
    for dtype in ("fp32", "fp16"):
        measured_as(monkeypatch, "rotary_embedding", dtype, {"decomposed": 2.0})


def _c(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v)))


def _unbind(how: str) -> list:
    """real, imag = pairs[..., 0], pairs[..., 1] as the exporters write it."""
    if how == "slice":  # dynamo
        return [_c("k0", np.array([0])), _c("k1", np.array([1])), _c("k2", np.array([2])), _c("last", np.array([-1])),
                helper.make_node("Slice", ["pairs", "k0", "k1", "last"], ["re5"]),
                helper.make_node("Slice", ["pairs", "k1", "k2", "last"], ["im5"]),
                helper.make_node("Squeeze", ["re5", "last"], ["real"]),
                helper.make_node("Squeeze", ["im5", "last"], ["imag"])]
    if how == "split":  # TorchScript
        return [_c("last", np.array([-1])), _c("ones", np.array([1, 1])),
                helper.make_node("Split", ["pairs", "ones"], ["re5", "im5"], axis=-1),
                helper.make_node("Squeeze", ["re5", "last"], ["real"]),
                helper.make_node("Squeeze", ["im5", "last"], ["imag"])]
    return [_c("last", np.array([-1])), _c("i0", np.array(0)), _c("i1", np.array(1)),
            helper.make_node("Gather", ["pairs", "i0"], ["real"], axis=-1),
            helper.make_node("Gather", ["pairs", "i1"], ["imag"], axis=-1)]


def _norms(norm: str, dtype, shape, eps=(1e-6, 1e-6)) -> tuple[list, list]:
    """(nodes, inputs) making x of `shape` as Flux's q/k norm does: `rms` RMSNormalization(xa, ga); `joined` that
    of xa (2 tokens) with ga and of xb (the rest) with gb, Concat on the token axis (epsilons `eps`)."""
    d, rng = shape[-1], np.random.default_rng(11)
    gammas = {g: numpy_helper.from_array(rng.uniform(0.5, 1.5, d).astype(NP[dtype]), g) for g in ("ga", "gb")}
    streams = [("xa", "ga", [*shape[:1], 2, *shape[2:]]), ("xb", "gb", [*shape[:1], shape[1] - 2, *shape[2:]])]
    if norm == "rms":
        streams = [("xa", "ga", list(shape))]
    nodes, inputs = [], []
    for (x, g, dims), e in zip(streams, eps):
        nodes += [helper.make_node("Constant", [], [g], value=gammas[g]),
                  helper.make_node("RMSNormalization", [x, g], [f"{x}_n" if norm == "joined" else "x"], axis=-1,
                                   epsilon=e, name=f"norm_{x}")]
        inputs.append(helper.make_tensor_value_info(x, dtype, dims))
    if norm == "joined":
        nodes.append(helper.make_node("Concat", ["xa_n", "xb_n"], ["x"], axis=1, name="join"))
    return nodes, inputs


def _model(how="slice", dtype=TensorProto.FLOAT, cast_back=True, cos_type=TensorProto.FLOAT, shape=(B, S, H, D),
           cos_shape=(1, S, 1, D), leak=False, norm=None, eps=(1e-6, 1e-6), x_out=False):
    """Flux's apply_rotary_emb: x (B, S, H, D) into pairs, rot = stack(-imag, real) flattened, then x * cos + rot *
    sin in cos's type (x cast up to fp32 where it is half precision, the sum cast back where `cast_back`; all in
    half precision where cos is too). `leak`: the negated half is a graph output too. `norm`: x is made by Flux's
    q/k norm (_norms, opset 23); `x_out`: x is a graph output too."""
    before, ins = _norms(norm, dtype, shape, eps) if norm else ([], [helper.make_tensor_value_info("x", dtype,
                                                                                                   list(shape))])
    n = [*before, _c("pair_shape", np.array([*shape[:-1], -1, 2])), _c("x_shape", np.array(shape)),
         helper.make_node("Reshape", ["x", "pair_shape"], ["pairs"]), *_unbind(how),
         helper.make_node("Neg", ["imag"], ["neg"], name="rope/Neg"),
         helper.make_node("Unsqueeze", ["neg", "last"], ["neg5"]),
         helper.make_node("Unsqueeze", ["real", "last"], ["real5"]),
         helper.make_node("Concat", ["neg5", "real5"], ["stack"], axis=-1),
         helper.make_node("Reshape", ["stack", "x_shape"], ["rot"])]
    x, rot = "x", "rot"
    if dtype != cos_type:  # the products in cos's type (fp32): x and rot cast up
        n += [helper.make_node("Cast", ["x"], ["x32"], to=TensorProto.FLOAT),
              helper.make_node("Cast", ["rot"], ["rot32"], to=TensorProto.FLOAT)]
        x, rot = "x32", "rot32"
    n += [helper.make_node("Mul", [x, "cos"], ["xc"]), helper.make_node("Mul", ["sin", rot], ["rs"]),
          helper.make_node("Add", ["xc", "rs"], ["sum"])]
    out_type = cos_type
    if dtype != cos_type and cast_back:
        n.append(helper.make_node("Cast", ["sum"], ["y"], to=dtype))
        out_type = dtype
    else:
        n.append(helper.make_node("Identity", ["sum"], ["y"]))
    outs = [helper.make_tensor_value_info("y", out_type, list(shape))]
    if leak:
        outs.append(helper.make_tensor_value_info("neg", dtype, None))
    if x_out:
        outs.append(helper.make_tensor_value_info("x", dtype, None))
    ins += [helper.make_tensor_value_info("cos", cos_type, list(cos_shape)),
            helper.make_tensor_value_info("sin", cos_type, list(cos_shape))]
    return helper.make_model(helper.make_graph(n, "g", ins, outs),
                             opset_imports=[helper.make_opsetid("", 23 if norm else 18)], ir_version=10)


def _run(model, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if lib:
        so.register_custom_ops_library(str(lib))
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    feeds = {}
    for i in s.get_inputs():
        shape = [d for d in i.shape]
        dt = np.float16 if i.type == "tensor(float16)" else np.float32
        v = rng.uniform(-np.pi, np.pi, shape) if i.name != "x" else rng.standard_normal(shape)
        feeds[i.name] = (np.cos(v) if i.name == "cos" else np.sin(v) if i.name == "sin" else v).astype(dt)
    return s.run(None, feeds)


def _check(model, lib, rtol):
    want = _run(model)
    report = rewrite(model, lib)
    assert report.rewritten == {"RotaryEmbedding": 1}, report.lines()
    onnx.checker.check_model(model)
    assert not {"Neg", "Concat", "Slice", "Split", "Gather", "Squeeze", "RMSNormalization"} & \
        {n.op_type for n in model.graph.node}
    for got, exp in zip(_run(model, lib), want):
        assert got.dtype == exp.dtype
        np.testing.assert_allclose(got.astype(np.float64), exp.astype(np.float64), rtol=rtol, atol=rtol)
    return next(n for n in model.graph.node if n.op_type == "RotaryEmbedding")


@pytest.mark.parametrize("how", ["slice", "split", "gather"])
def test_each_way_of_unbinding_the_pairs_becomes_one_node_that_computes_the_same(ort_library, measured, how):
    node = _check(_model(how), ort_library, 1e-6)
    assert list(node.input) == ["x", "cos", "sin"] and node.name == "rope/RotaryEmbedding"


def test_half_precision_x_is_read_as_it_is_and_the_casts_around_the_products_go(ort_library, measured):
    model = _model(dtype=TensorProto.FLOAT16)
    node = _check(model, ort_library, 2e-3)
    assert list(node.input) == ["x", "cos", "sin"] and list(node.output) == ["y"]
    assert [n.op_type for n in model.graph.node] == ["RotaryEmbedding"]


def test_a_sum_left_in_fp32_is_computed_from_the_cast_x_in_fp32(ort_library, measured):
    model = _model(dtype=TensorProto.FLOAT16, cast_back=False)
    node = _check(model, ort_library, 1e-6)
    assert node.input[0] == "x32" and list(node.output) == ["sum"]


def test_half_precision_cos_and_sin_are_cast_to_float_for_the_node(ort_library, measured):
    model = _model(dtype=TensorProto.FLOAT16, cos_type=TensorProto.FLOAT16)
    node = _check(model, ort_library, 4e-3)  # the export rounds each product to fp16; the node, only the sum
    made_by = {o: n for n in model.graph.node for o in n.output}
    assert [made_by[i].op_type for i in node.input[1:]] == ["Cast", "Cast"]


def test_whole_token_rows_turn_as_the_video_dits_write_them(ort_library, measured):
    _check(_model(shape=(B, S, H * D), cos_shape=(B, S, H * D)), ort_library, 1e-6)


def test_a_rotation_whose_inside_is_read_elsewhere_is_left_with_the_reason(ort_library, measured):
    report = rewrite(_model(leak=True), ort_library)
    assert not report.rewritten
    assert report.left == ["Neg node 'rope/Neg': 'neg', inside the rotation, is read elsewhere too"]


def test_an_unmeasured_dtype_keeps_the_exports_nodes_and_says_so(ort_library, monkeypatch):
    measured_as(monkeypatch, "rotary_embedding", "fp32", None)
    model = _model()
    report = rewrite(model, ort_library)
    assert not report.rewritten and "Neg" in {n.op_type for n in model.graph.node}
    assert report.left == ["Neg node 'rope/Neg': the library's RotaryEmbedding was not measured against the "
                           f"export's decomposed form in fp32 on {choices.table('rotary_embedding').device}: the "
                           "export's nodes kept"]


def test_a_negation_that_is_no_rotation_is_not_the_matchers_business(ort_library, measured):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    model = helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["n"]),
                                                 helper.make_node("Exp", ["n"], ["y"])], "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    report = rewrite(model, ort_library)
    assert not report.rewritten and not report.left


@pytest.fixture
def norms_measured(monkeypatch):
    """The norm forms measured faster too, fp32 and fp16."""
    for dtype in ("fp32", "fp16"):
        measured_as(monkeypatch, "rotary_embedding", dtype, {"decomposed": 2.0, "rms": 2.0,
                                                                        "rms_joined": 2.0})


@pytest.mark.parametrize("dtype, rtol", [(TensorProto.FLOAT, 1e-5), (TensorProto.FLOAT16, 4e-3)])
def test_the_q_k_norm_before_the_rotation_goes_into_its_node(ort_library, norms_measured, dtype, rtol):
    model = _model(dtype=dtype, norm="rms")
    node = _check(model, ort_library, rtol)
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert list(node.input[:3]) == ["xa", "cos", "sin"] and len(node.input) == 4
    assert inits[node.input[3]].dtype == np.float32  # gamma as fp32, whatever x is
    assert {a.name: helper.get_attribute_value(a) for a in node.attribute} == {"epsilon": pytest.approx(1e-6)}


@pytest.mark.parametrize("dtype, rtol", [(TensorProto.FLOAT, 1e-5), (TensorProto.FLOAT16, 4e-3)])
def test_two_streams_normed_and_joined_before_the_rotation_go_into_its_node(ort_library, norms_measured, dtype,
                                                                          rtol):
    model = _model(dtype=dtype, norm="joined")
    node = _check(model, ort_library, rtol)
    assert [node.input[i] for i in (0, 1, 2, 4)] == ["xa", "cos", "sin", "xb"] and len(node.input) == 6
    assert {a.name: helper.get_attribute_value(a) for a in node.attribute} == {"epsilon": pytest.approx(1e-6),
                                                                               "axis": 1}


@pytest.mark.parametrize("case, why", [
    ({"norm": "rms", "x_out": True}, "the q/k norm stays ORT's: its output 'x' is read elsewhere too"),
    ({"norm": "joined", "eps": (1e-6, 1e-5)}, None),  # one epsilon per node: not a join of the node's
    ({"norm": "rms", "shape": (B, S, H, 260), "cos_shape": (1, S, 1, 260)}, None),  # past the norm kernels' row
])
def test_a_norm_the_node_cannot_take_stays_orts_and_the_rotation_alone_is_taken(ort_library, norms_measured, case,
                                                                               why):
    model = _model(**case)
    want = _run(model)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"RotaryEmbedding": 1}, report.lines()
    assert report.sources == {("RotaryEmbedding", "rotary embedding on interleaved pairs"): 1}
    assert "RMSNormalization" in {n.op_type for n in model.graph.node}
    assert list(report.notes) == ([why] if why else []), report.notes
    for got, exp in zip(_run(model, ort_library), want):
        np.testing.assert_allclose(got, exp, rtol=1e-5, atol=1e-5)


def test_an_unmeasured_norm_form_keeps_orts_norm_and_says_so(ort_library, measured):
    model = _model(norm="joined")
    report = rewrite(model, ort_library)
    assert report.rewritten == {"RotaryEmbedding": 1} and sum(
        n.op_type == "RMSNormalization" for n in model.graph.node) == 2
    assert list(report.notes) == [
        "the q/k RMSNormalization stays ORT's: the library's RotaryEmbedding was not measured against the export's "
        f"rms_joined form in fp32 on {choices.table('rotary_embedding').device}: the export's nodes kept"]


def test_the_norm_forms_widest_head_is_the_kernels_widest_row(root):
    from tritonforge.pipeline.scripts.table import load_table
    from tritonforge.runtime.ortlib.rewrite.rotary_embedding import NORM_MAX_D

    table = load_table([root / "kernels" / "rotary_embedding_triton.py"])
    assert NORM_MAX_D == max(k.constants["BLOCK_D"] for k in table.kernels if "_rms_" in k.group)
