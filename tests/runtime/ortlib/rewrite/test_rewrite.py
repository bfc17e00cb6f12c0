"""The rewrite puts GroupNorm and softmax nodes into the library's domain and the model still computes
the same thing: ONNX Runtime's own CPU kernels on the original, the library's on the rewrite."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the rewritten models run in onnxruntime")
onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import (  # noqa: E402
    RewriteError,
    choices,
    rewrite,
    rewrite_file,
)
from tritonforge.runtime.ortlib.rewrite.graph import Graph  # noqa: E402

from tests.runtime.ortlib.rewrite.measured import measured_as  # noqa: E402


def model(nodes, inputs, outputs, inits, opset, extra=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, inits)
    # IR 10 (opset 21's): what onnxruntime >= 1.17 loads, whatever IR the installed onnx writes by default
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra], ir_version=10)


def run(m, feeds, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if lib:
        so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def sd_block(opset: int, c=8, groups=4):
    """GroupNormalization -> SiLU (Sigmoid, Mul) -> Softmax over the last axis, and a softmax over axis 1."""
    rng = np.random.default_rng(0)
    n_scale = groups if opset < 21 else c
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, n_scale).astype(np.float32), "scale"),
             numpy_helper.from_array(rng.uniform(-1, 1, n_scale).astype(np.float32), "bias")]
    nodes = [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["gn"], num_groups=groups, epsilon=1e-5,
                              name="up.0.norm1"),
             helper.make_node("Sigmoid", ["gn"], ["sig"]), helper.make_node("Mul", ["gn", "sig"], ["act"]),
             helper.make_node("Softmax", ["act"], ["y"], axis=-1, name="attn"),
             helper.make_node("Softmax", ["act"], ["z"], axis=1, name="across")]
    f = TensorProto.FLOAT
    shape = [2, c, 5, 6]
    return model(nodes, [helper.make_tensor_value_info("x", f, shape)],
                 [helper.make_tensor_value_info("y", f, shape), helper.make_tensor_value_info("z", f, shape)],
                 inits, opset)


@pytest.mark.parametrize("opset", [18, 21])
def test_group_normalization_and_softmax_rewritten_compute_the_same(ort_library, opset):
    m = sd_block(opset)
    x = (np.random.default_rng(1).standard_normal((2, 8, 5, 6)) * 3 + 2).astype(np.float32)
    want = run(m, {"x": x})
    report = rewrite(m, ort_library, softmax_min_cols=0, layout="nchw")  # its rows of 6: rewritten only when asked
    assert report.rewritten == {"GroupNormalization": 1, "Softmax": 1} and report.fused_silu == 1
    assert any("'across'" in why and "axis 1 is not the last" in why for why in report.left)
    ops = [(n.domain, n.op_type, n.name) for n in m.graph.node]
    assert ops == [("tritonforge", "GroupNormalization", "up.0.norm1"), ("tritonforge", "Softmax", "attn"),
                   ("", "Softmax", "across")]
    onnx.checker.check_model(m)
    got = run(m, {"x": x}, ort_library)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=1e-4)


def test_microsoft_group_norm_gets_fp32_parameters(ort_library):
    rng = np.random.default_rng(2)
    c = 16
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float16), "gamma"),
             numpy_helper.from_array(rng.uniform(-1, 1, c).astype(np.float16), "beta")]
    h = TensorProto.FLOAT16
    m = model([helper.make_node("GroupNorm", ["x", "gamma", "beta"], ["y"], domain="com.microsoft", groups=4,
                                activation=1, channels_last=1, epsilon=1e-5, name="gn")],
              [helper.make_tensor_value_info("x", h, [1, 3, 3, c])],
              [helper.make_tensor_value_info("y", h, [1, 3, 3, c])],
              inits, 17, [helper.make_opsetid("com.microsoft", 1)])
    report = rewrite(m, ort_library, layout="nchw")
    assert report.rewritten == {"GroupNorm": 1}
    node = m.graph.node[0]
    assert (node.domain, node.op_type) == ("tritonforge", "GroupNorm")
    gammas = {t.name: t for t in m.graph.initializer}
    assert gammas[node.input[1]].data_type == TensorProto.FLOAT
    x = rng.standard_normal((1, 3, 3, c)).astype(np.float16)
    v = x.astype(np.float64).reshape(1, 9, 4, 4)
    y = ((v - v.mean((1, 3), keepdims=True)) / np.sqrt(v.var((1, 3), keepdims=True) + 1e-5)).reshape(x.shape)
    y = y * numpy_helper.to_array(inits[0]).astype(np.float64) + numpy_helper.to_array(inits[1])
    y = y / (1 + np.exp(-y))
    np.testing.assert_allclose(run(m, {"x": x}, ort_library)[0].astype(np.float64), y, atol=2e-2)


def test_what_does_not_qualify_is_left_with_the_reason(ort_library):
    f = TensorProto.FLOAT
    m = model([helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, name="dyn")],
              [helper.make_tensor_value_info(n, f, shape) for n, shape in (("x", [1, 4, 3]), ("s", [4]), ("b", [4]))],
              [helper.make_tensor_value_info("y", f, [1, 4, 3])], [], 21)
    report = rewrite(m, ort_library, layout="nchw")
    assert not report.rewritten
    assert report.left == ["GroupNormalization node 'dyn': scale and bias are not constants"]
    assert m.graph.node[0].domain == ""


def test_rewrite_skips_ops_the_library_has_no_cuda_kernel_for(ort_library_ort_profile):
    m = sd_block(21)
    report = rewrite(m, ort_library_ort_profile, softmax_min_cols=0, layout="nchw")
    assert "GroupNormalization" not in report.rewritten
    assert any("no CUDA GroupNormalization kernel for fp32" in why for why in report.left)
    assert report.rewritten["Softmax"] == 1  # ORT's softmax groups are in its profile


def _softmax_model(cols, elem=TensorProto.FLOAT16):
    shape = [2, 8, 64, cols]
    return model([helper.make_node("Softmax", ["x"], ["y"], axis=-1, name="attn")],
                 [helper.make_tensor_value_info("x", elem, shape)], [helper.make_tensor_value_info("y", elem, shape)],
                 [], 17)


def test_softmax_rows_stay_orts_where_orts_kernel_measured_faster(ort_library):
    """The committed measurements decide (softmax_measured.py): ORT's kernel keeps 77-column rows, the
    library takes 256 in fp16 and 512 in fp32; a length between two measured ones goes by the nearer."""
    for cols, elem, why in ((77, TensorProto.FLOAT16, "rows of 77: ORT's own kernel measured faster (the library "
                                                       "0.95x at 77 columns, fp16, NVIDIA H200)"),
                            (256, TensorProto.FLOAT16, None),
                            (512, TensorProto.FLOAT, None),
                            (50257, TensorProto.FLOAT, "rows of 50257: ORT's own kernel measured faster (the "
                                                       "library 0.97x at 50257 columns, fp32"),
                            (52000, TensorProto.FLOAT16, None),
                            (80, TensorProto.FLOAT, "rows of 80: ORT's own kernel measured faster (the library "
                                                    "0.93x at 77 columns"),
                            (32, TensorProto.FLOAT, "rows of 32: shorter than every row length measured (64 "
                                                    "columns)"),
                            ("k", TensorProto.FLOAT16, None),  # symbolic: the library measured faster overall
                            # bf16 has no rows of its own: fp16's are not taken for it
                            (4096, TensorProto.BFLOAT16, "the library's softmax was not measured against ORT's own "
                                                         "in bf16 on NVIDIA H200: ORT's node kept")):
        m = _softmax_model(cols, elem)
        report = rewrite(m, ort_library, layout="nchw")
        assert (m.graph.node[0].domain == "tritonforge") == (why is None), (cols, report.left)
        if why:
            assert report.left[0].startswith(f"Softmax node 'attn': {why}"), report.left
            assert report.left[0].endswith("softmax_min_cols=0 (--all-softmax) rewrites it anyway")
    for elem in (TensorProto.FLOAT16, TensorProto.BFLOAT16):
        m = _softmax_model(77, elem)
        assert rewrite(m, ort_library, softmax_min_cols=0, layout="nchw").rewritten == {"Softmax": 1}
    m = _softmax_model(300)
    assert rewrite(m, ort_library, softmax_min_cols={"fp16": 512}).left[0] == (
        "Softmax node 'attn': rows of 300: under the 512 columns asked for (fp16); softmax_min_cols=0 "
        "(--all-softmax) rewrites it anyway") and m.graph.node[0].domain == ""


def test_rewrite_file_writes_a_new_model_and_refuses_its_own_input(ort_library, tmp_path):
    src = tmp_path / "block.onnx"
    onnx.save(sd_block(18), str(src))
    with pytest.raises(RewriteError, match="would overwrite"):
        rewrite_file(src, src, ort_library, layout="nchw")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(RewriteError, match="bad.onnx: cannot read an ONNX model"):
        rewrite_file(bad, tmp_path / "out.onnx", ort_library, layout="nchw")
    assert not (tmp_path / "out.onnx").exists()
    report = rewrite_file(src, tmp_path / "block.tf.onnx", ort_library, layout="nchw")
    assert report.rewritten["GroupNormalization"] == 1
    assert {n.domain for n in onnx.load(str(tmp_path / "block.tf.onnx")).graph.node} == {"tritonforge", ""}


def test_nodes_after_convolutions_are_typed_and_rewritten(ort_library):
    """GroupNormalization -> SiLU -> Conv -> GroupNormalization: ONNX infers nothing past the first
    GroupNormalization (onnx 1.23); the rewrite still types and rewrites both."""
    rng = np.random.default_rng(3)
    c = 8
    f = TensorProto.FLOAT
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), n) for n in ("s1", "s2")]
    inits += [numpy_helper.from_array(rng.uniform(-1, 1, c).astype(np.float32), n) for n in ("b1", "b2")]
    inits.append(numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) * 0.2).astype(np.float32), "w"))
    nodes = [helper.make_node("GroupNormalization", ["x", "s1", "b1"], ["g1"], num_groups=2, name="n1"),
             helper.make_node("Sigmoid", ["g1"], ["a1"]), helper.make_node("Mul", ["g1", "a1"], ["h1"]),
             helper.make_node("Conv", ["h1", "w"], ["h2"], pads=[1, 1, 1, 1]),
             helper.make_node("GroupNormalization", ["h2", "s2", "b2"], ["y"], num_groups=4, name="n2")]
    m = model(nodes, [helper.make_tensor_value_info("x", f, [1, c, 6, 6])],
              [helper.make_tensor_value_info("y", f, [1, c, 6, 6])], inits, 21)
    x = rng.standard_normal((1, c, 6, 6)).astype(np.float32)
    want = run(m, {"x": x})[0]
    report = rewrite(m, ort_library, layout="nchw")
    assert report.rewritten == {"GroupNormalization": 2} and report.fused_silu == 1 and not report.left
    np.testing.assert_allclose(run(m, {"x": x}, ort_library)[0], want, atol=2e-5, rtol=1e-4)


# ---- real exports: tiny diffusers models exported as users export them (exports/make.py) -------------
EXPORTS = Path(__file__).resolve().parent / "exports"
CASES = sorted(p.name for p in EXPORTS.glob("*.onnx"))
UNETS = [c for c in CASES if c.startswith(("sd15_", "sdxl_"))]  # the UNets and VAE decoders: GroupNorm models
DITS = [c for c in CASES if c not in UNETS]  # the diffusion transformers
# The attentions of one step of each tiny diffusion transformer (benchmarks/e2e_models.py's tiny configs): SD3's
# 2 joint blocks; SD3.5's 2 and the dual block's second attention; Flux's 1 double and 2 single blocks; PixArt's
# self- and cross-attention in each of 2 blocks.
DIT_ATTENTIONS = {"sd3_medium": 2, "sd35_medium": 3, "flux_dev": 3, "pixart_sigma": 4}
# Their GELU-tanhs, each after a Linear's bias: SD3's and SD3.5's two image MLPs and the first block's context MLP
# (the last block's context stream has none); Flux's double block's two MLPs and each single block's proj_mlp;
# PixArt's two MLPs and its caption projection.
DIT_GELUS = {"sd3_medium": 3, "sd35_medium": 3, "flux_dev": 4, "pixart_sigma": 3}
# Their modulated LayerNorms: SD3's norm1, norm1_context, norm2 and norm2_context in block 0, norm1,
# norm1_context (AdaLayerNormContinuous) and norm2 in block 1, and norm_out; SD3.5's the same but its first
# block's norm1, which modulates one norm two ways (its dual attention: not one node's work); Flux's double
# block's four, each single block's one and norm_out; PixArt's norm1 and norm2 per block and norm_out.
DIT_NORMS = {"sd3_medium": 8, "sd35_medium": 7, "flux_dev": 7, "pixart_sigma": 5}
# Their LayerNorms of a constant weight and bias that no single modulation follows (SD3.5's first block's norm1):
# the library's node in its `affine` form where that form measured faster in the dtype.
DIT_AFFINE_NORMS = {"sd3_medium": 0, "sd35_medium": 1, "flux_dev": 0, "pixart_sigma": 0}
# Of those, the norms after a gated residual whose branch is a Linear (MatMul + bias): SD3's norm2 of each block,
# block 0's norm2_context, block 1's norm1 and norm1_context and norm_out (after block 0's and 1's MLPs); SD3.5's
# the same six (its plain one is block 0's norm1_context); Flux's double block's norm2 and norm2_context, and its
# second single block's norm (the Slices and Concat between the single blocks rejoined, fp16's Clip taken in; the
# first single block's reads the Concat of the double block's two streams, norm_out a Slice of the last's sum);
# PixArt's norm1 of block 1 and norm_out (its norm2 follows the cross-attention's ungated residual).
DIT_BIASED_NORMS = {"sd3_medium": 6, "sd35_medium": 6, "flux_dev": 3, "pixart_sigma": 2}
# Their rotary embeddings: Flux's query and key in its double block's joint attention and in each single block's.
DIT_ROTARIES = {"sd3_medium": 0, "sd35_medium": 0, "flux_dev": 6, "pixart_sigma": 0}
# (batch, grid) sizes each dynamic export serves as exported: SD3's position embedding is cropped to the example's
# resolution and Flux's text projection reshaped to the example's batch (the exports fail at other sizes themselves)
DIT_SIZES = {"sd3_medium": ((2, 4), (1, 4)), "sd35_medium": ((2, 4), (1, 4)), "flux_dev": ((1, 4), (1, 3))}
TOL = {"fp16": 2e-2, "fp32": 5e-3, "bf16": 5e-2}  # relative to the output's largest magnitude, as the e2e bench checks
# The tiny UNets' norms after a Linear's bias and the residual (norm2 and norm3 of each of their 4 transformer
# blocks), and their GEGLUs (128 or 256 wide: ORT's BiasSplitGelu serves none, and each is left naming the widths).
UNET_SKIP_NORMS, UNET_GEGLUS = 8, 4


@pytest.fixture
def linears_kept(monkeypatch):
    """No Linear measured: the tests of the other fusions count their nodes alone (test_linear.py has the Linear's)."""
    for dtype in list(choices.table("linear").speedup):
        measured_as(monkeypatch, "linear", dtype, None)


def _ops(path) -> Counter:
    m = onnx.load(str(path), load_external_data=False)
    return Counter((n.domain, n.op_type) for n in m.graph.node)


def _feeds(sess, seed=0, batch=2, side=(4, 4)) -> dict:
    """Random inputs of the session's shapes; a dim the model leaves symbolic takes `batch` on axis 0 and
    `side` (latent height, width) on axes 2 and 3 (how the exports name them differs by exporter)."""
    rng = np.random.default_rng(seed)
    out = {}
    for i in sess.get_inputs():
        dt = {"tensor(float16)": np.float16, "tensor(float)": np.float32, "tensor(int64)": np.int64}[i.type]
        free = {0: batch, 2: side[0], 3: side[1]}
        shape = [d if isinstance(d, int) else free[a] for a, d in enumerate(i.shape)]
        out[i.name] = (rng.integers(0, 1000, shape) if dt is np.int64 else rng.standard_normal(shape)).astype(dt)
    return out


def _rel(a, b) -> float:
    a, b = a.astype(np.float64), b.astype(np.float64)
    assert np.isfinite(a).all() and np.isfinite(b).all()
    return float(np.abs(a - b).max() / np.abs(a).max())


def test_the_exports_are_what_the_exporters_write():
    """Each exporter's GroupNorm form is in the fixtures: TorchScript's and dynamo's InstanceNormalization
    decomposition, ORT's fused GroupNorm / SkipGroupNorm after NhwcConv; each diffusion transformer's attention as
    a decomposition (TorchScript, dynamo at opset 18) or ONNX Attention (dynamo at opset 23), one per attention of
    its config."""
    assert {c.split(".")[1] for c in CASES} == {"torchscript", "dynamo", "dynamo23", "ort"}
    for name in DITS:
        ops = _ops(EXPORTS / name)
        form = ("", "Attention") if ".dynamo23." in name else ("", "Softmax")
        assert ops[form] == DIT_ATTENTIONS[name.split("_tiny")[0]] and not ops[("", "InstanceNormalization")], name
    for name in UNETS:
        ops = _ops(EXPORTS / name)
        if ".ort." in name:
            assert ops[("com.microsoft", "GroupNorm")] and ops[("com.microsoft", "SkipGroupNorm")], name
            assert ops[("com.microsoft", "NhwcConv")], name
        else:
            assert ops[("", "InstanceNormalization")] and ops[("", "Reshape")], name


@pytest.mark.parametrize("name", [c for c in UNETS if ".ort." not in c])
def test_every_group_norm_and_attention_of_an_export_is_rewritten_and_it_computes_the_same(ort_library, tmp_path,
                                                                                            linears_kept, name):
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    before = _ops(src)
    report = rewrite_file(src, dst, ort_library, softmax_min_cols=0, attention="tritonforge", layout="nchw")
    norms, attentions = before[("", "InstanceNormalization")], before[("", "Softmax")]
    blocks, gegl = (UNET_SKIP_NORMS, UNET_GEGLUS) if "_unet_" in name else (0, 0)  # a VAE has neither
    skips = blocks if choices.table("skip_layer_norm").speedup.get(name.split(".")[-2]) else 0
    # the library's BiasSplitGelu serves every width where rows measured it; ORT's none of this one's
    library_gegl = gegl if choices.table("bias_split_gelu").library.get(name.split(".")[-2]) else 0
    # where the affine form measured faster: each block's first norm (no residual before it), and the norms after
    # a residual that SkipLayerNormalization does not take (the LayerNormalization alone)
    firsts = before[("", "LayerNormalization")] - skips \
        if choices.table("ada_layer_norm").speedup.get(name.split(".")[-2], {}).get("affine") else 0
    assert report.rewritten == {"GroupNormalization": norms, "MultiHeadAttention": attentions,
                                **({"SkipLayerNormalization": skips} if skips else {}),
                                **({"BiasSplitGelu": library_gegl} if library_gegl else {}),
                                **({"AdaLayerNorm": firsts} if firsts else {})}, report.lines()
    # what stays says why: the GEGLUs (their widths), and the norms where no rows measured the fused one
    unmeasured = [w for w in report.left if "SkipLayerNormalization was not measured" in w]
    narrow = [w for w in report.left if "BiasSplitGelu takes (batch, tokens, width) of width 2560" in w]
    assert len(unmeasured) == blocks - skips and len(narrow) == gegl - library_gegl, report.lines()
    assert report.fused_silu > 0 and len(report.left) == len(unmeasured) + len(narrow), report.lines()
    after = _ops(dst)
    assert after[("tritonforge", "GroupNormalization")] == norms and not after[("", "InstanceNormalization")]
    # each attention is one node: its Softmax, both MatMuls and the heads' Reshapes and Transposes went
    assert after[("tritonforge", "MultiHeadAttention")] == attentions and not after[("", "Softmax")]
    assert after[("", "MatMul")] == before[("", "MatMul")] - 2 * attentions
    # the Mul/Add/Sigmoid/Shape/Reshape nodes of each pattern went with it
    assert sum(after.values()) < sum(before.values()) - 3 * norms
    onnx.checker.check_model(str(dst))
    want = run_file(src, None)
    got = run_file(dst, ort_library)
    assert _rel(want, got) < TOL[name.split(".")[-2]]


def session(path, lib=None):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    if lib:
        so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def run_file(path, lib):
    sess = session(path, lib)
    return sess.run(None, _feeds(sess))[0]


@pytest.mark.parametrize("name", [c for c in UNETS if "_unet_" in c])
def test_each_unet_blocks_norms_become_a_skip_layer_norm_or_the_librarys_node_and_compute_the_same(
        ort_library, tmp_path, monkeypatch, linears_kept, name):
    """Where SkipLayerNormalization and the library's affine norm measured faster in the export's dtype: every norm
    after a Linear and its residual in every transformer block, as either exporter writes it (TorchScript's Div by
    1 included), goes to SkipLayerNormalization, each block's first norm (no residual before it) to AdaLayerNorm,
    and where the library's BiasSplitGelu measured faster each GEGLU to it (at the tiny models' widths, which ORT's
    has no kernel for)."""
    dtype = name.split(".")[-2]
    measured_as(monkeypatch, "skip_layer_norm", dtype, {"export": 1.5})
    measured_as(monkeypatch, "ada_layer_norm", dtype, {"affine": 1.5})
    measured_as(monkeypatch, "bias_split_gelu", dtype, {"decomposed": 2.0, "onnx_gelu": 2.0}, "LIBRARY")
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    before = _ops(src)
    report = rewrite_file(src, dst, ort_library, layout="nchw")
    firsts = before[("", "LayerNormalization")] - UNET_SKIP_NORMS
    assert report.rewritten["SkipLayerNormalization"] == UNET_SKIP_NORMS, report.lines()
    assert firsts > 0 and report.rewritten["AdaLayerNorm"] == firsts, report.lines()
    assert report.rewritten["BiasSplitGelu"] == UNET_GEGLUS, report.lines()
    after = _ops(dst)
    assert after[("tritonforge", "BiasSplitGelu")] == UNET_GEGLUS and not after[("", "Erf")] and not after[("", "Gelu")]
    assert after[("com.microsoft", "SkipLayerNormalization")] == UNET_SKIP_NORMS
    assert after[("tritonforge", "AdaLayerNorm")] == firsts and not after[("", "LayerNormalization")]
    # each took its residual Add and its Linear's bias Add: the MatMuls stay
    assert after[("", "MatMul")] == before[("", "MatMul")] - 2 * report.rewritten["MultiHeadAttention"]
    assert after[("", "Add")] <= before[("", "Add")] - 2 * UNET_SKIP_NORMS
    want, got = run_file(src, None), run_file(dst, ort_library)
    assert _rel(want, got) < TOL[dtype]


@pytest.mark.parametrize("name", [c for c in UNETS if ".dynamic." in c])
def test_one_rewritten_dynamic_export_serves_every_batch_and_resolution(ort_library, tmp_path, name):
    """An export with symbolic batch, height and width (Optimum-style), rewritten once: it loads, and at every
    batch and resolution it gives the export's numbers, the attention's 3-D GroupNorm ([N, C, H*W]) included."""
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    sess = session(src)
    assert all(isinstance(d, str) for d in [sess.get_inputs()[0].shape[a] for a in (0, 2, 3)]), "not dynamic"
    report = rewrite_file(src, dst, ort_library, layout="nchw")
    assert report.rewritten["GroupNormalization"] == _ops(src)[("", "InstanceNormalization")], report.lines()
    ours = session(dst, ort_library)
    for batch in (1, 3):
        for side in ((4, 4), (6, 8), (8, 6)):
            feeds = _feeds(sess, batch + side[0], batch, side)
            want, got = sess.run(None, feeds)[0], ours.run(None, feeds)[0]
            assert want.shape[0] == batch and got.shape == want.shape
            assert _rel(want, got) < TOL[name.split(".")[-2]], (batch, side)


def _dit_feeds(sess, seed=0, batch=2, grid=4) -> dict:
    """Random inputs of a diffusion transformer's shapes; its symbolic dims by what they are: Flux's image tokens
    (hidden_states' axis 1, img_ids' axis 0) grid^2, the latent's height and width 2 * grid, the batch `batch`."""
    rng = np.random.default_rng(seed)
    out, sizes = {}, {}
    for i in sess.get_inputs():
        dt = {"tensor(float16)": np.float16, "tensor(float)": np.float32, "tensor(int64)": np.int64}[i.type]
        shape = []
        for a, d in enumerate(i.shape):
            if not isinstance(d, str):
                shape.append(d)
                continue
            tokens = (i.name, a) in (("hidden_states", 1), ("img_ids", 0)) and len(i.shape) < 4
            shape.append(sizes.setdefault(d, grid * grid if tokens else 2 * grid if a >= 2 else batch))
        out[i.name] = (rng.integers(0, 1000, shape) if dt is np.int64 else rng.standard_normal(shape)).astype(dt)
    return out


def _computes_the_export(src, dst, lib, name: str) -> None:
    """The rewrite `dst` (the library's CPU ops) gives the export `src`'s numbers, at each size a dynamic export
    serves (DIT_SIZES), else at batch 2 and a 4 x 4 grid."""
    ours, theirs = session(dst, lib), session(src)
    model, dtype = name.split("_tiny")[0], name.split(".")[-2]
    for batch, grid in DIT_SIZES[model] if ".dynamic." in name else ((2, 4),):
        feeds = _dit_feeds(theirs, batch + grid, batch, grid)
        want, got = theirs.run(None, feeds)[0], ours.run(None, feeds)[0]
        assert got.shape == want.shape and _rel(want, got) < TOL[dtype], (batch, grid)


@pytest.mark.parametrize("name", DITS)
def test_every_attention_of_a_diffusion_transformer_export_is_fused_and_it_computes_the_same(ort_library, tmp_path,
                                                                                            name):
    """As a user runs it: the measured choice of op, the default layout. Every attention goes to one node (the
    library's or ORT's), the transposes of its heads into (B, H, S, d) and back go with it where the graph has the
    heads token-major (all but SD3.5's normed q and k), and the rewrite gives the export's numbers (at two sizes
    where its axes are dynamic)."""
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    model, dtype = name.split("_tiny")[0], name.split(".")[-2]
    attentions = DIT_ATTENTIONS[model]
    report = rewrite_file(src, dst, ort_library)
    # each GELU goes to ORT's FastGelu where that measured faster for the form and dtype, and the installed
    # onnxruntime runs FastGelu in that dtype (its CPU kernels: float and float16); else it stays and is named
    form = "decomposed" if ".torchscript." in name else "onnx_gelu"
    fused = choices.table("gelu").speedup.get(dtype, {}).get(form, 0) >= 1 and (
        dtype != "bf16" or "CUDAExecutionProvider" in ort.get_available_providers())
    gelus = DIT_GELUS[model] if fused else 0
    orts = DIT_GELUS[model] if ".ort." in name else 0  # ORT's optimizer wrote its FastGelus already: they stay
    # where the library's Linear measured faster with the GELU in its epilogue, the GELU goes there instead
    linear = {k: v >= 1 for k, v in choices.table("linear").speedup.get(dtype, {}).items()}
    in_linear = DIT_GELUS[model] if linear.get("gelu_tanh") and not orts else 0
    gelus = 0 if orts or in_linear else gelus
    linears = report.rewritten.get("Linear", 0)
    ada = choices.table("ada_layer_norm").speedup.get(dtype, {})
    affine = DIT_AFFINE_NORMS[model] if ada.get("affine") else 0
    norms = (DIT_NORMS[model] if ada else 0) + affine
    rotaries = DIT_ROTARIES[model] if choices.table("rotary_embedding").speedup.get(dtype) else 0
    before, after = _ops(src), _ops(dst)
    einsums = before[("", "Einsum")] if dtype == "bf16" else 0  # SD3's unpatchify: a Transpose, which bf16 has
    assert report.rewritten == {"MultiHeadAttention": attentions, **({"FastGelu": gelus} if gelus else {}),
                                **({"AdaLayerNorm": norms} if norms else {}),
                                **({"RotaryEmbedding": rotaries} if rotaries else {}),
                                **({"Linear": linears} if linears else {}),
                                **({"Transpose": einsums} if einsums else {})}, report.lines()
    assert after[("", "Einsum")] == before[("", "Einsum")] - einsums
    assert (linears > 0) == bool(linear.get("none") or in_linear), report.lines()
    assert report.sources[("Linear", "MatMul + bias Add + GELU-tanh")] == in_linear, report.lines()
    assert len(report.left) == (DIT_GELUS[model] - gelus - orts - in_linear + DIT_NORMS[model] - (norms - affine)
                                + DIT_ROTARIES[model] - rotaries), report.lines()
    assert report.rejoined == (1 if model == "flux_dev" else 0)  # between Flux's two single blocks
    assert after[("com.microsoft", "FastGelu")] == gelus + orts
    assert after[("", "Tanh")] == before[("", "Tanh")] * (not gelus and not in_linear)
    assert after[("tritonforge", "Linear")] == linears
    assert after[("tritonforge", "AdaLayerNorm")] == norms
    assert after[("", "LayerNormalization")] == before[("", "LayerNormalization")] - norms
    assert after[("tritonforge", "MultiHeadAttention")] + after[("com.microsoft", "MultiHeadAttention")] == attentions
    assert not after[("", "Softmax")] and not after[("", "Attention")]
    dropped = before[("", "Transpose")] + einsums - after[("", "Transpose")]
    assert dropped >= (0 if name.startswith("sd35_") else 4) * attentions, (before, after)
    if ".bf16." in name:  # the CPU EP has no bfloat16 MatMul: the load is for a GPU session, and said so
        assert "which only a GPU EP runs" in report.loads, report.loads
        if "CUDAExecutionProvider" not in ort.get_available_providers():  # nor a bfloat16 MultiHeadAttention
            assert after[("tritonforge", "MultiHeadAttention")] == attentions and report.notes, report.lines()
        return
    _computes_the_export(src, dst, ort_library, name)


@pytest.mark.parametrize("name", [c for c in DITS if ".bf16." not in c])
def test_a_gated_linears_bias_goes_into_the_norm_after_it_where_that_measured_faster(ort_library, tmp_path,
                                                                                   monkeypatch, name):
    """With the gated_bias form measured faster: every norm after a Linear's gated residual takes the Linear's
    bias, as either exporter writes it, dynamic axes included; its MatMul stays, and the numbers are the export's."""
    model, dtype = name.split("_tiny")[0], name.split(".")[-2]
    measured_as(monkeypatch, "ada_layer_norm", dtype, {"plain": 2.0, "gated": 2.0, "gated_bias": 2.0})
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    report = rewrite_file(src, dst, ort_library)
    assert report.rewritten["AdaLayerNorm"] == DIT_NORMS[model], report.lines()
    m = onnx.load(str(dst), load_external_data=False)
    takes = Counter(len(n.input) for n in m.graph.node if n.op_type == "AdaLayerNorm")
    assert takes[6] == DIT_BIASED_NORMS[model] and takes[5] == 0, takes
    made_by = {o: n.op_type for n in m.graph.node for o in n.output}
    biased = [n for n in m.graph.node if n.op_type == "AdaLayerNorm" and len(n.input) == 6]
    assert all(made_by[n.input[3]] == "MatMul" for n in biased)  # the Linear's MatMul stays
    _computes_the_export(src, dst, ort_library, name)


@pytest.mark.parametrize("name", [c for c in DITS if c.startswith("flux_")])
def test_fluxs_rotary_embeddings_become_one_node_each_where_that_measured_faster(ort_library, tmp_path, monkeypatch,
                                                                                name):
    """With the library's RotaryEmbedding measured faster: each rotation of Flux's queries and keys is one node, as
    the dynamo exporter writes it at opset 18 and 23, dynamic axes included; in half precision it reads x itself and
    writes x's type (the casts to fp32 and back go), and the numbers are the export's."""
    dtype = name.split(".")[-2]
    measured_as(monkeypatch, "rotary_embedding", dtype, {"decomposed": 2.0})
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    report = rewrite_file(src, dst, ort_library)
    assert report.rewritten["RotaryEmbedding"] == DIT_ROTARIES["flux_dev"], report.lines()
    assert not [why for why in report.left if why.startswith("Neg ")], report.left
    before, after = _ops(src), _ops(dst)
    assert after[("", "Neg")] == before[("", "Neg")] - DIT_ROTARIES["flux_dev"] == 0
    m = onnx.load(str(dst), load_external_data=False)
    made_by = {o: n.op_type for n in m.graph.node for o in n.output}
    types = {v.name: v.type.tensor_type.elem_type for v in m.graph.input}
    rotaries = [n for n in m.graph.node if n.op_type == "RotaryEmbedding"]
    assert all(made_by.get(n.input[0]) != "Cast" for n in rotaries)  # x itself, whatever its type
    if dtype != "fp32":
        assert after[("", "Cast")] < before[("", "Cast")] - DIT_ROTARIES["flux_dev"]
        assert types["hidden_states"] == {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[dtype]
    if ".bf16." in name:  # the CPU EP has no bfloat16 MatMul
        return
    _computes_the_export(src, dst, ort_library, name)


@pytest.mark.parametrize("name", [c for c in DITS if c.startswith("flux_")])
def test_fluxs_q_k_norms_and_their_join_go_into_the_rotation_where_that_measured_faster(ort_library, tmp_path,
                                                                                      monkeypatch, name):
    """With the norm forms measured faster: at opset 23 (the ONNX RMSNormalization) each single block's q and k norm
    and each double block's two streams' norms with their Concat go into the rotation's node, whose gammas are fp32;
    at opset 18 (the norm decomposed) the rotation alone is taken. With BiasConcat measured faster too, each double
    block's value heads, which Flux joins as (B, S, H, d), are the two streams' MatMuls joined with their biases
    (the Linears measured faster leave those MatMuls to the join). The numbers are the export's."""
    dtype = name.split(".")[-2]
    measured_as(monkeypatch, "rotary_embedding", dtype, {"decomposed": 2.0, "rms": 2.0, "rms_joined": 2.0})
    measured_as(monkeypatch, "bias_concat", dtype, {"joined": 2.0})
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    report = rewrite_file(src, dst, ort_library)
    before, after = _ops(src), _ops(dst)
    opset23 = ".dynamo23." in name
    # Flux's single blocks (2 here) norm and turn q and k; its double block (1) joins text and image first
    joined, single = (2, 4) if opset23 else (0, 0)
    source = "rotary embedding on interleaved pairs"
    assert report.rewritten["RotaryEmbedding"] == DIT_ROTARIES["flux_dev"], report.lines()
    assert report.sources[("RotaryEmbedding", f"{source} with its RMSNormalization")] == single, report.lines()
    assert report.sources[("RotaryEmbedding", f"{source} with two streams' RMSNormalizations and their Concat")] == \
        joined, report.lines()
    assert after[("", "RMSNormalization")] == before[("", "RMSNormalization")] - single - 2 * joined
    assert after[("", "Concat")] <= before[("", "Concat")] - joined
    m = onnx.load(str(dst), load_external_data=False)
    inits = {t.name: t for t in m.graph.initializer}
    for n in (n for n in m.graph.node if n.op_type == "RotaryEmbedding" and len(n.input) > 3):
        gammas = [n.input[3], *n.input[5:]]
        assert len(n.input) in (4, 6) and all(inits[g].data_type == TensorProto.FLOAT for g in gammas)
        assert {a.name for a in n.attribute} == ({"epsilon", "axis"} if len(n.input) == 6 else {"epsilon"})
    made_by = {o: n.op_type for n in m.graph.node for o in n.output}
    joins = [n for n in m.graph.node if n.op_type == "BiasConcat"]
    assert len(joins) == 1 and all(made_by[i] == "MatMul" for i in joins[0].input[:2]), report.lines()
    if ".bf16." in name:  # the CPU EP has no bfloat16 MatMul
        return
    _computes_the_export(src, dst, ort_library, name)


@pytest.mark.parametrize("name", [c for c in DITS if c.startswith("sd3_") and ".bf16." not in c])
def test_the_joint_attentions_stream_biases_go_into_the_join_where_that_measured_faster(ort_library, tmp_path,
                                                                                     monkeypatch, name):
    """With the library's BiasConcat measured faster: each joint attention's query, key and value are the two
    streams' MatMuls joined with their biases, as either exporter writes them and after ORT's optimizer; the bias
    Adds go, the Linears measured faster (fp16) leave those MatMuls to the join, and the numbers are the export's
    (the dynamic TorchScript export's key Shape reads the MatMul). (SD3.5's joint attention reads its normed query
    and key heads as (B, H, S, d): its value heads are read so too, and no join is written.)"""
    model, dtype = name.split("_tiny")[0], name.split(".")[-2]
    measured_as(monkeypatch, "bias_concat", dtype, {"joined": 2.0})
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    report = rewrite_file(src, dst, ort_library)
    before, after = _ops(src), _ops(dst)
    joins = 3 * DIT_ATTENTIONS[model]
    # the dynamic TorchScript export's Shapes of each block's key projection and of proj_out (the unpatchify's)
    assert report.shapes_moved == (DIT_ATTENTIONS[model] + 1 if ".torchscript.dynamic." in name else 0)
    assert after[("tritonforge", "BiasConcat")] == joins, report.lines()
    assert after[("", "Add")] <= before[("", "Add")] - 2 * joins
    said = "the streams' Linear biases added as they are joined (tritonforge.BiasConcat)"
    assert any(said in line for line in report.lines()), report.lines()
    m = onnx.load(str(dst), load_external_data=False)
    made_by = {o: n.op_type for n in m.graph.node for o in n.output}
    assert all(made_by[i] == "MatMul" for n in m.graph.node if n.op_type == "BiasConcat" for i in n.input[:2])
    view = Graph(m, tmp_path)  # the rewrite's types of its own output: the join is the streams' tokens together
    for n in (n for n in m.graph.node if n.op_type == "BiasConcat"):
        a, b, y = (view.dims(v) for v in (n.input[0], n.input[1], n.output[0]))
        assert y[2] == a[2] and (None in (a[1], b[1]) or y[1] == a[1] + b[1]), (a, b, y)
    _computes_the_export(src, dst, ort_library, name)


def test_orts_optimized_export_is_rewritten_whole(ort_library, tmp_path):
    """ORT's optimizer leaves no types past its contrib ops; every fused GroupNorm is still taken (their
    types are a subset of what the library serves), the one InstanceNormalization it did not fuse, and the
    attention it left decomposed."""
    src = EXPORTS / "sd15_vae_decoder_tiny.ort.fp16.onnx"
    before = _ops(src)
    report = rewrite_file(src, tmp_path / "m.tf.onnx", ort_library, softmax_min_cols=0, attention="tritonforge",
                          layout="nchw")
    assert report.rewritten["GroupNorm"] == before[("com.microsoft", "GroupNorm")]
    assert report.rewritten["SkipGroupNorm"] == before[("com.microsoft", "SkipGroupNorm")]
    assert report.rewritten["GroupNormalization"] == before[("", "InstanceNormalization")]
    assert report.rewritten["MultiHeadAttention"] == before[("", "Softmax")] and not report.left, report.lines()


def test_the_dynamo_exports_external_data_is_written_beside_the_rewrite_byte_for_byte(ort_library, tmp_path):
    from onnx.external_data_helper import uses_external_data

    src = EXPORTS / "sd15_unet_tiny.dynamo.fp32.onnx"
    report = rewrite_file(src, tmp_path / "unet.tf.onnx", ort_library, layout="nchw")
    assert report.wrote == [str(tmp_path / "unet.tf.onnx.data"), str(tmp_path / "unet.tf.onnx")]
    a = {t.name: t for t in onnx.load(str(src), load_external_data=False).graph.initializer}
    b = onnx.load(str(tmp_path / "unet.tf.onnx"), load_external_data=False)
    moved = [t for t in b.graph.initializer if uses_external_data(t) and t.name in a and uses_external_data(a[t.name])]
    assert len(moved) > 10
    for t in moved:
        theirs = numpy_helper.to_array(a[t.name], str(EXPORTS))
        assert numpy_helper.to_array(t, str(tmp_path)).tobytes() == theirs.tobytes()
        assert {e.key: e.value for e in t.external_data}["location"] == "unet.tf.onnx.data"


@pytest.mark.gpu
@pytest.mark.parametrize("name", [c for c in CASES if ".bf16." not in c])  # bfloat16: the e2e bench binds it
def test_a_rewritten_export_runs_on_the_cuda_ep_as_the_export_does(ort_cuda, library, tmp_path, name):
    """The export on ORT's CUDA EP against its rewrite with the library's CUDA kernels."""
    src, dst = EXPORTS / name, tmp_path / "m.tf.onnx"
    report = rewrite_file(src, dst, library, softmax_min_cols=0)
    # the default layout is channels-last: a VAE's attention GroupNorm over (N, C, H*W) stays NCHW, and is named;
    # so are the tiny UNets' GEGLUs (widths ORT's BiasSplitGelu does not serve) and unmeasured fused norms
    said = ("stays NCHW: its input has rank 3", "BiasSplitGelu takes (batch, tokens, width) of width 2560",
            "SkipLayerNormalization was not measured", "RotaryEmbedding was not measured")
    assert report.rewritten and all(any(s in why for s in said) for why in report.left), report.lines()
    outs = []
    for path, lib in ((src, None), (dst, library)):
        so = ort_cuda.SessionOptions()
        so.log_severity_level = 3
        if lib:
            so.register_custom_ops_library(str(lib))
        sess = ort_cuda.InferenceSession(str(path), so, providers=["CUDAExecutionProvider"])
        feeds = _feeds(sess) if name in UNETS else _dit_feeds(sess, 0, *DIT_SIZES.get(name.split("_tiny")[0],
                                                                                     ((2, 4),))[0])
        outs.append(sess.run(None, feeds)[0])
    assert _rel(*outs) < TOL[name.split(".")[-2]]


# ---- subgraphs: If branches (a Loop or Scan body is the same walk) ----------------------------------
def _pattern(prefix: str, outer_weights: bool = False):
    """test_patterns.decomposed()'s GroupNorm + SiLU on the outer value x, every other name prefixed:
    (nodes, its own initializers, the weights it reads from the scope around it)."""
    from .test_patterns import decomposed

    m = decomposed()

    def ren(v):
        return v if v in ("x", "") else prefix + v

    nodes = []
    for k, n in enumerate(m.graph.node):
        c = onnx.NodeProto()
        c.CopyFrom(n)
        c.input[:] = [ren(i) for i in n.input]
        c.output[:] = [ren(o) for o in n.output]
        c.name = prefix + (n.name or f"{n.op_type}_{k}")
        nodes.append(c)
    inits = [numpy_helper.from_array(numpy_helper.to_array(t), ren(t.name)) for t in m.graph.initializer]
    outer = [t for t in inits if outer_weights and t.name in (prefix + "Mul_w", prefix + "Add_w")]
    return nodes, [t for t in inits if t not in outer], outer


def _branchy_model():
    """x -> GroupNorm pattern `b/` at the top, whose InstanceNormalization output the If node `peek` reads in
    a branch; If node `branchy`, whose then_branch holds GroupNorm pattern `a/` on the outer x (its weights
    outer initializers, as exporters keep them) and whose else_branch is Sigmoid(x)."""
    f, shape = TensorProto.FLOAT, [2, 8, 5, 6]
    a_nodes, a_inits, a_outer = _pattern("a/", outer_weights=True)
    b_nodes, b_inits, _ = _pattern("b/")
    then_a = helper.make_graph(a_nodes, "then_a", [], [helper.make_tensor_value_info("a/out", f, shape)], a_inits)
    else_a = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["e_out"])], "else_a", [],
                               [helper.make_tensor_value_info("e_out", f, shape)])
    then_p = helper.make_graph([helper.make_node("ReduceSum", ["b/n"], ["p_t"], keepdims=0)], "then_p", [],
                               [helper.make_tensor_value_info("p_t", f, [])])
    else_p = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["p_e"], keepdims=0)], "else_p", [],
                               [helper.make_tensor_value_info("p_e", f, [])])
    nodes = [*b_nodes,
             helper.make_node("If", ["cond"], ["branchy_out"], then_branch=then_a, else_branch=else_a, name="branchy"),
             helper.make_node("If", ["cond"], ["peek_out"], then_branch=then_p, else_branch=else_p, name="peek")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", f, shape),
                                       helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info(o, f, s) for o, s in (("b/out", shape), ("branchy_out", shape),
                                                                                ("peek_out", []))],
                          [*b_inits, *a_outer])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_patterns_in_if_branches_are_rewritten_and_values_a_branch_reads_stay(ort_library):
    m = _branchy_model()
    onnx.checker.check_model(m)
    x = (np.random.default_rng(5).standard_normal((2, 8, 5, 6)) * 2 + 1).astype(np.float32)
    want = {c: run(m, {"x": x, "cond": np.array(c)}) for c in (True, False)}
    report = rewrite(m, ort_library, layout="nchw")
    assert report.rewritten == {"GroupNormalization": 1} and report.fused_silu == 1, report.lines()
    then_a = next(a.g for a in m.graph.node[-2].attribute if a.name == "then_branch")
    assert [(n.domain, n.op_type) for n in then_a.node] == [("tritonforge", "GroupNormalization")]
    assert report.left == ["InstanceNormalization node 'b/norm/InstanceNormalization': its output is not reshaped "
                           "back to X's shape (or is read by other nodes too)"]
    assert "b/n" in {o for n in m.graph.node for o in n.output}  # what `peek` reads is still made
    onnx.checker.check_model(m)
    for c in (True, False):
        for got, w in zip(run(m, {"x": x, "cond": np.array(c)}, ort_library), want[c]):
            np.testing.assert_allclose(got, w, atol=2e-5, rtol=1e-4)


def test_a_branchs_group_norm_runs_channels_last_too(ort_library):
    """The NHWC layout inside subgraphs as in the main graph: the branch's 4-D GroupNorm between Transposes."""
    m = _branchy_model()
    x = (np.random.default_rng(5).standard_normal((2, 8, 5, 6)) * 2 + 1).astype(np.float32)
    want = {c: run(m, {"x": x, "cond": np.array(c)}) for c in (True, False)}
    report = rewrite(m, ort_library, layout="nhwc")
    then_a = next(a.g for a in m.graph.node[-2].attribute if a.name == "then_branch")
    assert [(n.domain, n.op_type) for n in then_a.node] == [("", "Transpose"), ("tritonforge", "GroupNorm"),
                                                            ("", "Transpose")], report.lines()
    assert report.channels_last == 1 and not any("stays NCHW" in why for why in report.left), report.lines()
    onnx.checker.check_model(m)
    for c in (True, False):
        for got, w in zip(run(m, {"x": x, "cond": np.array(c)}, ort_library), want[c]):
            np.testing.assert_allclose(got, w, atol=2e-5, rtol=1e-4)


def test_a_left_pattern_in_a_branch_names_where_it_is(ort_library):
    m = _branchy_model()
    then_a = next(a.g for a in m.graph.node[-2].attribute if a.name == "then_branch")
    then_a.output.append(helper.make_tensor_value_info("a/n", TensorProto.FLOAT, None))  # an intermediate leaves
    report = rewrite(m, ort_library, layout="nchw")
    assert not report.rewritten
    assert ("InstanceNormalization node 'a/norm/InstanceNormalization' in the then_branch of If node 'branchy': "
            "its output is not reshaped back") in report.left[0]
