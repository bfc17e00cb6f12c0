"""Each declared form on graphs built as the exporters write them, with the variations exporters and
optimizers produce, and the near misses that must stay, each with its reason."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the rewritten models run in onnxruntime")
onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import rewrite  # noqa: E402

ELEM = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
NP = {"fp32": np.float32, "fp16": np.float16}


def decomposed(*, c=8, groups=4, dims=(2, 8, 5, 6), dtype="fp32", weight="c11", bias="c11", silu="xs",
               scale=None, zero=None, regroup=None, back="shape", opset=17):
    """torch.onnx's GroupNorm: Reshape -> InstanceNormalization -> Reshape -> Mul -> Add [-> x * Sigmoid(x)].
    weight / bias: c11 (an initializer (C,1,1)), identity (behind an Identity, as TorchScript dedups them),
    unsqueeze (a (C) initializer through Unsqueeze, as dynamo writes it), expand, c (per last axis: not per
    channel), none."""
    rng = np.random.default_rng(0)
    t = ELEM[dtype]
    np_t = NP.get(dtype, np.float32)
    rank = len(dims)
    inits, nodes = [], []

    def const(name, value, dt=np_t):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dt), name))
        return name

    nodes.append(helper.make_node("Reshape", ["x", const("regroup", regroup or [0, groups, -1], np.int64)], ["g"]))
    nodes.append(helper.make_node("InstanceNormalization", ["g", const("ones", scale if scale is not None else
                                                                         np.ones(groups)),
                                                            const("zeros", zero if zero is not None else
                                                                  np.zeros(groups))], ["n"],
                                  epsilon=1e-5, name="norm/InstanceNormalization"))
    if back == "shape":
        nodes.append(helper.make_node("Shape", ["x"], ["xs"]))
        nodes.append(helper.make_node("Reshape", ["n", "xs"], ["y0"]))
    else:
        nodes.append(helper.make_node("Reshape", ["n", const("back", back, np.int64)], ["y0"]))
    y = "y0"
    for op, form, draw in (("Mul", weight, lambda: rng.uniform(0.5, 1.5, c)),
                           ("Add", bias, lambda: rng.uniform(-1, 1, c))):
        if form == "none":
            continue
        v = draw()
        name = f"{op}_w"
        if form == "c11":
            const(name, v.reshape((c,) + (1,) * (rank - 2)))
        elif form == "identity":
            nodes.append(helper.make_node("Identity", [const(name + "_src", v.reshape((c,) + (1,) * (rank - 2)))],
                                          [name]))
        elif form == "unsqueeze":
            nodes.append(helper.make_node("Unsqueeze", [const(name + "_src", v), const(name + "_axes",
                                                                                       list(range(1, rank - 1)),
                                                                                       np.int64)], [name]))
        elif form == "expand":
            nodes.append(helper.make_node("Expand", [const(name + "_src", v.reshape((1, c) + (1,) * (rank - 2))),
                                                     const(name + "_shape", [1, c] + [1] * (rank - 2), np.int64)],
                                          [name]))
        elif form == "c":
            const(name, rng.uniform(0.5, 1.5, dims[-1]))
        nodes.append(helper.make_node(op, [y, name], [f"{op}_out"]))
        y = f"{op}_out"
    if silu:
        nodes.append(helper.make_node("Sigmoid", [y], ["sig"]))
        nodes.append(helper.make_node("Mul", [y, "sig"] if silu == "xs" else ["sig", y], ["out"]))
    else:
        nodes.append(helper.make_node("Identity", [y], ["out"]))
    g = helper.make_graph(nodes, "gn", [helper.make_tensor_value_info("x", t, list(dims))],
                          [helper.make_tensor_value_info("out", t, list(dims))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def run(m, x, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if lib:
        so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("form", [
    {}, {"weight": "identity", "bias": "identity"}, {"weight": "unsqueeze", "bias": "unsqueeze"},
    {"weight": "expand", "bias": "none"}, {"weight": "none", "bias": "none", "silu": None}, {"silu": "sx"},
    {"back": [2, 8, 5, 6]}, {"back": [0, 8, 5, 6], "regroup": [2, 4, -1]}, {"dtype": "fp16"},
    {"dims": (2, 8, 30), "weight": "unsqueeze", "bias": "identity"},  # dynamo's 3-D attention norm: (C, 1)
    {"dims": (1, 8, 2, 3, 4), "regroup": [0, 4, 48]},
])
def test_each_exporters_group_norm_is_one_op_that_computes_the_same(ort_library, form):
    m = decomposed(**form)
    dims = form.get("dims", (2, 8, 5, 6))
    x = (np.random.default_rng(1).standard_normal(dims) * 3 + 1).astype(NP[form.get("dtype", "fp32")])
    want = run(m, x)
    report = rewrite(m, ort_library, layout="nchw")
    assert report.rewritten == {"GroupNormalization": 1} and not report.left, report.lines()
    assert report.fused_silu == (form.get("silu", "xs") is not None)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("GroupNormalization") == 1 and "InstanceNormalization" not in ops
    assert not {"Mul", "Add", "Sigmoid", "Shape", "Reshape"} & set(ops), ops  # the whole pattern went
    assert {t.name for t in m.graph.initializer} >= {"norm/GroupNorm_tf_scale", "norm/GroupNorm_tf_bias"}
    assert "ones" not in {t.name for t in m.graph.initializer}  # what only the pattern read is gone
    got = run(m, x, ort_library)
    tol = 2e-2 if form.get("dtype") == "fp16" else 1e-4
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=tol, rtol=tol)


def test_bf16_is_rewritten_too(ort_library):
    report = rewrite(decomposed(dtype="bf16", opset=22), ort_library, layout="nchw")
    assert report.rewritten == {"GroupNormalization": 1}, report.lines()


def test_a_weight_per_last_axis_is_not_a_channel_weight_and_stays(ort_library):
    m = decomposed(weight="c", bias="none", silu=None)
    x = np.random.default_rng(2).standard_normal((2, 8, 5, 6)).astype(np.float32)
    want = run(m, x)
    assert rewrite(m, ort_library, layout="nchw").rewritten == {"GroupNormalization": 1}
    assert [n.op_type for n in m.graph.node] == ["GroupNormalization", "Mul", "Identity"]
    np.testing.assert_allclose(run(m, x, ort_library), want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(("form", "why"), [
    ({"scale": np.full(4, 2.0)}, "not a GroupNorm: its scale is not all ones"),
    ({"zero": np.full(4, 0.5)}, "not a GroupNorm: its B is not all zeros"),
    ({"regroup": [0, -1, 4]}, "does not group X's channels: shape [0, -1, 4] is not [N, 4, -1]"),
    ({"regroup": [0, 4, 7]}, "does not hold a group's channels and pixels in its last axis"),
    ({"regroup": [1, 4, -1]}, "does not keep the batch"),
    ({"back": [2, 8, 30]}, "after it does not restore X's shape [2, 8, 5, 6]"),
    ({"c": 8, "groups": 3, "scale": np.ones(3), "zero": np.zeros(3)}, "3 groups do not divide X's 8 channels"),
])
def test_almost_a_group_norm_stays_and_the_report_says_why(ort_library, form, why):
    m = decomposed(**form)
    report = rewrite(m, ort_library, layout="nchw")
    assert not report.rewritten
    assert len(report.left) == 1 and report.left[0].startswith("InstanceNormalization node "
                                                               "'norm/InstanceNormalization': ")
    assert why in report.left[0], report.left
    assert "InstanceNormalization" in [n.op_type for n in m.graph.node]


def test_a_plain_instance_norm_stays(ort_library):
    c = 4
    inits = [numpy_helper.from_array(np.ones(c, np.float32), "s"),
             numpy_helper.from_array(np.zeros(c, np.float32), "b")]
    f = TensorProto.FLOAT
    m = helper.make_model(helper.make_graph(
        [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="inorm")], "i",
        [helper.make_tensor_value_info("x", f, [1, c, 3, 3])], [helper.make_tensor_value_info("y", f, [1, c, 3, 3])],
        inits), opset_imports=[helper.make_opsetid("", 17)])
    assert rewrite(m, ort_library, layout="nchw").left == [
        "InstanceNormalization node 'inorm': not a GroupNorm: its input is not a Reshape that groups channels"]


def test_a_library_without_nchw_kernels_leaves_the_patterns_with_the_reason(ort_library_ort_profile):
    report = rewrite(decomposed(), ort_library_ort_profile, layout="nchw")
    assert not report.rewritten
    assert report.left == ["InstanceNormalization node 'norm/InstanceNormalization': the library has no CUDA "
                           "GroupNormalization kernel for fp32"]


def _ms_group_norm(channels_last=1, before="Relu"):
    """com.microsoft.GroupNorm behind an op ONNX's inference knows nothing of, so X's type is unknown."""
    c = 8
    h = TensorProto.FLOAT16
    x_dims = [1, 3, 3, c] if channels_last else [1, c, 3, 3]
    inits = [numpy_helper.from_array(np.linspace(0.5, 1.5, c).astype(np.float16), "gamma"),
             numpy_helper.from_array(np.linspace(-1, 1, c).astype(np.float16), "beta")]
    nodes = [helper.make_node("Opaque", ["x"], ["u"], domain="vendor"),
             helper.make_node("GroupNorm", ["u", "gamma", "beta"], ["y"], domain="com.microsoft", groups=4,
                              activation=1, channels_last=channels_last, epsilon=1e-5, name="gn")]
    m = helper.make_model(helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", h, x_dims)],
                                            [helper.make_tensor_value_info("y", h, x_dims)], inits),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1),
                                         helper.make_opsetid("vendor", 1)])
    return m


def test_orts_group_norm_of_unknown_type_is_rewritten_where_the_library_serves_every_type_it_admits(ort_library):
    m = _ms_group_norm()
    report = rewrite(m, ort_library, layout="nchw")
    assert report.rewritten == {"GroupNorm": 1}, report.lines()
    node = m.graph.node[1]
    assert (node.domain, node.op_type) == ("tritonforge", "GroupNorm")
    gamma = next(t for t in m.graph.initializer if t.name == node.input[1])
    assert gamma.data_type == TensorProto.FLOAT  # the library's ops take fp32 gamma and beta


def test_orts_nchw_group_norm_becomes_group_normalization(ort_library):
    m = _ms_group_norm(channels_last=0)
    report = rewrite(m, ort_library, layout="nchw")
    assert report.rewritten == {"GroupNormalization": 1}, report.lines()
    node = m.graph.node[1]
    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    assert (node.op_type, a["num_groups"], a["activation"]) == ("GroupNormalization", 4, 1)
