"""The custom-op library in onnxruntime-gpu's CUDA EP: every op on model and awkward shapes against
float64, through IOBinding on device tensors and ORT's CUDA graph, and the kernels it chose."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

CUDA = "CUDAExecutionProvider"
TOL = {"fp16": 2e-2, "fp32": 2e-4}
NP = {"fp16": np.float16, "fp32": np.float32}


def session(ort, lib, node, inputs, outputs, graph=False, opset=21):
    """A session of `node` (or a list of nodes) on the CUDA EP with the library registered."""
    from onnx import helper

    m = helper.make_model(helper.make_graph(node if isinstance(node, list) else [node], "t", inputs, outputs),
                          opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("tritonforge", 1)])
    m.ir_version = 10  # what onnxruntime 1.20+ reads (onnx 1.23 writes 14 by default)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.register_custom_ops_library(str(lib))
    opts = {"enable_cuda_graph": "1"} if graph else {}
    return ort.InferenceSession(m.SerializeToString(), so, providers=[(CUDA, opts)])


def run_bound(ort, s, feeds: dict, shapes: dict):
    """Run with IOBinding: inputs and outputs as device OrtValues; outputs fetched after."""
    b = s.io_binding()
    keep = []
    for name, a in feeds.items():
        v = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a), "cuda", 0)
        keep.append(v)
        b.bind_ortvalue_input(name, v)
    outs = {}
    for name, (shape, dtype) in shapes.items():
        outs[name] = ort.OrtValue.ortvalue_from_shape_and_type(shape, dtype, "cuda", 0)
        b.bind_ortvalue_output(name, outs[name])
    s.run_with_iobinding(b)
    s.run_with_iobinding(b)  # a second run: with a CUDA graph, the replay
    return {k: v.numpy() for k, v in outs.items()}


def vi(name, dtype, shape):
    from onnx import TensorProto, helper

    t = {"fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT}[dtype]
    return helper.make_tensor_value_info(name, t, shape)


def gn_ref(x, gamma, beta, groups, silu, skip=None, bias=None):
    v = x.astype(np.float64)
    if skip is not None:
        v = v + (skip.astype(np.float64).reshape(v.shape[0], 1, 1, -1) if skip.ndim == 2 else skip)
    if bias is not None:
        v = v + bias.astype(np.float64)
    n, h, w, c = v.shape
    g = v.reshape(n, h * w, groups, c // groups)
    y = ((g - g.mean((1, 3), keepdims=True)) / np.sqrt(g.var((1, 3), keepdims=True) + 1e-5)).reshape(v.shape)
    y = y * gamma + beta
    return (y / (1 + np.exp(-y)) if silu else y), v


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("shape, groups, silu", [((2, 64, 64, 320), 32, 1), ((1, 32, 32, 1920), 32, 1),
                                                 ((1, 256, 256, 128), 32, 0), ((1, 7, 9, 24), 8, 1),
                                                 ((3, 5, 5, 6), 2, 0)])
def test_group_norm_nhwc(ort_cuda, library, dtype, shape, groups, silu):
    from onnx import helper

    rng = np.random.default_rng(0)
    c = shape[-1]
    x = (rng.standard_normal(shape) * 2 + 1).astype(NP[dtype])
    gamma, beta = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    node = helper.make_node("GroupNorm", ["x", "g", "b"], ["y"], domain="tritonforge", groups=groups, activation=silu)
    s = session(ort_cuda, library, node, [vi("x", dtype, list(shape)), vi("g", "fp32", [c]), vi("b", "fp32", [c])],
                [vi("y", dtype, list(shape))])
    y = run_bound(ort_cuda, s, {"x": x, "g": gamma, "b": beta}, {"y": (list(shape), NP[dtype])})["y"]
    ref, _ = gn_ref(x, gamma, beta, groups, silu)
    np.testing.assert_allclose(y.astype(np.float64), ref, atol=TOL[dtype] * 2, rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("skip_kind", ["full", "nc", "nc_no_bias"])
def test_skip_group_norm(ort_cuda, library, dtype, skip_kind):
    """nc_no_bias: what the rewrite writes for a ResNet's `h + temb` (rewrite/layout.py), no bias input."""
    from onnx import helper

    rng = np.random.default_rng(1)
    shape, c = (2, 16, 16, 640), 640
    x = rng.standard_normal(shape).astype(NP[dtype])
    skip = rng.standard_normal(shape if skip_kind == "full" else (2, c)).astype(NP[dtype])
    bias = rng.standard_normal(c).astype(NP[dtype])
    gamma, beta = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    with_bias = skip_kind != "nc_no_bias"
    ins = ["x", "g", "b", "skip"] + ["bias"] * with_bias
    node = helper.make_node("SkipGroupNorm", ins, ["y", "s"], domain="tritonforge", groups=32, activation=1)
    s = session(ort_cuda, library, node,
                [vi("x", dtype, list(shape)), vi("g", "fp32", [c]), vi("b", "fp32", [c]),
                 vi("skip", dtype, list(skip.shape))] + [vi("bias", dtype, [c])] * with_bias,
                [vi("y", dtype, list(shape)), vi("s", dtype, list(shape))])
    feeds = {"x": x, "g": gamma, "b": beta, "skip": skip, **({"bias": bias} if with_bias else {})}
    out = run_bound(ort_cuda, s, feeds, {"y": (list(shape), NP[dtype]), "s": (list(shape), NP[dtype])})
    ref, total = gn_ref(x, gamma, beta, 32, 1, skip, bias if with_bias else None)
    np.testing.assert_allclose(out["s"].astype(np.float64), total, atol=TOL[dtype] * 4, rtol=TOL[dtype])
    np.testing.assert_allclose(out["y"].astype(np.float64), ref, atol=TOL[dtype] * 2, rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("shape, silu", [((1, 128, 256, 256), 1), ((2, 320, 64, 64), 1), ((1, 512, 64, 64), 0),
                                         ((2, 6, 7, 5), 0), ((1, 64, 3, 3), 1)])
def test_group_normalization_nchw(ort_cuda, library, dtype, shape, silu):
    from onnx import helper

    rng = np.random.default_rng(2)
    c = shape[1]
    groups = 32 if c % 32 == 0 else 3
    x = (rng.standard_normal(shape) * 2 + 20).astype(NP[dtype])  # a mean far from zero
    scale, bias = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], domain="tritonforge", num_groups=groups,
                            activation=silu)
    s = session(ort_cuda, library, node, [vi("x", dtype, list(shape)), vi("s", "fp32", [c]), vi("b", "fp32", [c])],
                [vi("y", dtype, list(shape))])
    y = run_bound(ort_cuda, s, {"x": x, "s": scale, "b": bias}, {"y": (list(shape), NP[dtype])})["y"]
    v = x.astype(np.float64).reshape(shape[0], groups, -1)
    ref = ((v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5)).reshape(shape)
    ref = ref * scale.reshape(1, c, 1, 1) + bias.reshape(1, c, 1, 1)
    ref = ref / (1 + np.exp(-ref)) if silu else ref
    np.testing.assert_allclose(y.astype(np.float64), ref, atol=TOL[dtype] * 2, rtol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("op, shape", [("Softmax", (4096, 77)), ("Softmax", (16, 50257)), ("Softmax", (3, 1000)),
                                       ("LogSoftmax", (5, 32000)), ("Softmax", (2, 12, 197, 197))])
def test_softmax_last_axis(ort_cuda, library, dtype, op, shape):
    from onnx import helper

    x = (np.random.default_rng(3).standard_normal(shape) * 3).astype(NP[dtype])
    s = session(ort_cuda, library, helper.make_node(op, ["x"], ["y"], domain="tritonforge"),
                [vi("x", dtype, list(shape))], [vi("y", dtype, list(shape))])
    y = run_bound(ort_cuda, s, {"x": x}, {"y": (list(shape), NP[dtype])})["y"]
    v = x.astype(np.float64) - x.max(-1, keepdims=True)
    ref = v - np.log(np.exp(v).sum(-1, keepdims=True)) if op == "LogSoftmax" else np.exp(v) / np.exp(v).sum(
        -1, keepdims=True)
    np.testing.assert_allclose(y.astype(np.float64), ref, atol=TOL[dtype], rtol=TOL[dtype] * 5)


def test_cuda_graph_capture_and_the_choices_made(ort_cuda, library, tmp_path):
    from onnx import helper
    from tritonforge.runtime import ortlib

    shape = (1, 32, 32, 640)
    x = np.random.default_rng(4).standard_normal(shape).astype(np.float16)
    g, b = np.ones(640, np.float32), np.zeros(640, np.float32)
    node = helper.make_node("GroupNorm", ["x", "g", "b"], ["y"], domain="tritonforge", groups=32, activation=1)
    ins = [vi("x", "fp16", list(shape)), vi("g", "fp32", [640]), vi("b", "fp32", [640])]
    # the sessions stay alive: ORT unloads the library (and what it chose) with the last of them
    sessions = [session(ort_cuda, library, node, ins, [vi("y", "fp16", list(shape))], graph=graph)
                for graph in (False, True)]
    plain, graphed = (run_bound(ort_cuda, s, {"x": x, "g": g, "b": b}, {"y": (list(shape), np.float16)})["y"]
                      for s in sessions)
    assert np.array_equal(plain, graphed)  # the same kernel, chosen once for the shape, replayed
    rows = ortlib.choices(library)
    mine = [r for r in rows if r["op"] == "group_norm_silu_fp16" and r["signature"].startswith("1_1024_640_32_silu")]
    assert len(mine) == 1 and mine[0]["kernel"].startswith("GroupNorm")
    # every choice (this process's earlier sessions' too, of every op family) names a kernel of the library: a
    # kernel is named after its group, except in ORT's softmax groups, which hold kernels of several softmax
    # families (softmax_packed_...)
    groups = set(ortlib.info(library)["groups"])
    for r in rows:
        assert any(r["kernel"].startswith(g + "_") for g in groups) or (
            "softmax" in r["op"].lower() and "softmax_" in r["kernel"]), r
    # saved as a tune file: every choice, one line each, in the form the library reads back
    saved = tmp_path / "saved.tune"
    assert ortlib.save_choices(saved, library) == len(rows)
    lines = [line.split("\t") for line in saved.read_text().splitlines() if not line.startswith("#")]
    assert lines == [[r["device"], r["op"], r["signature"], r["kernel"]] for r in rows]


TUNED_RUN = """
import json, sys
import numpy as np, onnxruntime as ort
from onnx import TensorProto, helper
from tritonforge.runtime import ortlib
lib, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT16, [rows, cols]) for n in "xy"]
m = helper.make_model(helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], domain="tritonforge")], "t",
                                        vi[:1], vi[1:]),
                      opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("tritonforge", 1)])
m.ir_version = 10
so = ort.SessionOptions()
ortlib.register(so, lib)
s = ort.InferenceSession(m.SerializeToString(), so, providers=["CUDAExecutionProvider"])
x = np.random.default_rng(5).standard_normal((rows, cols)).astype(np.float16)
y = s.run(None, {"x": x})[0].astype(np.float64)
e = np.exp(x.astype(np.float64) - x.max(-1, keepdims=True))
print(json.dumps({"err": float(np.abs(y - e / e.sum(-1, keepdims=True)).max()), "info": ortlib.info(lib),
                  "choices": ortlib.choices(lib)}))
"""


def test_a_tune_file_choice_is_taken_instead_of_timing(ort_cuda, library, registry, tmp_path):
    """The library starts from its tune file (here named by TRITONFORGE_ORT_TUNE_FILE; shipped, the .tune
    beside it): the kernel it names runs for that device and shape, untimed, and gives the right answer."""
    import json
    import subprocess
    import sys

    from tritonforge.runtime.ops.softmax import Softmax

    rows, cols = 64, 4096
    admitted = [name for name, _ in Softmax(registry, "fp16").candidates(rows, cols)]
    wanted = admitted[-1]  # the last the contracts admit: not what timing would pick first
    tune = tmp_path / "choices.tune"
    tune.write_text(f"# device, op key, signature, kernel\n{registry.backend.device_name}\tsoftmax_fp16\t"
                    f"{rows}_{cols}\t{wanted}\n")
    env = {**os.environ, "TRITONFORGE_ORT_TUNE_FILE": str(tune)}
    proc = subprocess.run([sys.executable, "-c", TUNED_RUN, str(library), str(rows), str(cols)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert got["info"]["tune_file"] == str(tune) and got["info"]["tune_choices"] == 1
    assert [c["kernel"] for c in got["choices"] if c["signature"] == f"{rows}_{cols}"] == [wanted]
    assert got["err"] < 2e-3


def _bf16(x: np.ndarray) -> np.ndarray:
    """x rounded to bfloat16 (nearest even), as float64: what ORT's Cast hands the op."""
    from tritonforge.runtime.reference import quantize

    return quantize(x, "bf16")


@pytest.mark.parametrize("case", ["softmax_77", "softmax_vocab", "group_norm_nhwc", "group_normalization_nchw"])
def test_bf16_between_casts(ort_cuda, library, case):
    """bf16 end to end in a CUDA session: fp32 in, ORT's Cast to bfloat16, the library's op, Cast back."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(6)
    shape = {"softmax_77": (4096, 77), "softmax_vocab": (3, 50257), "group_norm_nhwc": (1, 32, 32, 320),
             "group_normalization_nchw": (1, 320, 32, 32)}[case]
    x = (rng.standard_normal(shape) * 2 + (0 if case.startswith("softmax") else 3)).astype(np.float32)
    c = shape[-1] if case == "group_norm_nhwc" else shape[1]
    gamma, beta = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    if case.startswith("softmax"):
        op = helper.make_node("Softmax", ["xb"], ["yb"], domain="tritonforge")
        extra, feeds = [], {"x": x}
    else:
        kind = "GroupNorm" if case == "group_norm_nhwc" else "GroupNormalization"
        attrs = {"groups": 32, "activation": 1} if kind == "GroupNorm" else {"num_groups": 32, "activation": 1}
        op = helper.make_node(kind, ["xb", "g", "b"], ["yb"], domain="tritonforge", **attrs)
        extra, feeds = [vi("g", "fp32", [c]), vi("b", "fp32", [c])], {"x": x, "g": gamma, "b": beta}
    nodes = [helper.make_node("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16), op,
             helper.make_node("Cast", ["yb"], ["y"], to=TensorProto.FLOAT)]
    m = helper.make_model(helper.make_graph(nodes, "bf16", [vi("x", "fp32", list(shape)), *extra],
                                            [vi("y", "fp32", list(shape))]),
                          opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("tritonforge", 1)])
    m.ir_version = 10
    so = ort_cuda.SessionOptions()
    so.log_severity_level = 3
    so.register_custom_ops_library(str(library))
    s = ort_cuda.InferenceSession(m.SerializeToString(), so, providers=[CUDA])
    y = run_bound(ort_cuda, s, feeds, {"y": (list(shape), np.float32)})["y"].astype(np.float64)
    v = _bf16(x)
    if case.startswith("softmax"):
        e = np.exp(v - v.max(-1, keepdims=True))
        ref = e / e.sum(-1, keepdims=True)
        np.testing.assert_allclose(y, ref, atol=1e-4, rtol=2e-2)
    else:
        if case == "group_norm_nhwc":
            ref, _ = gn_ref(v, gamma, beta, 32, 1)
        else:
            g = v.reshape(shape[0], 32, -1)
            ref = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(shape)
            ref = ref * gamma.reshape(1, c, 1, 1) + beta.reshape(1, c, 1, 1)
            ref = ref / (1 + np.exp(-ref))
        np.testing.assert_allclose(y, ref, atol=4e-2, rtol=2e-2)


def test_a_rewritten_model_runs_on_the_cuda_ep_as_orts_own_does(ort_cuda, library, tmp_path):
    """The README's flow: an fp16 GroupNormalization + SiLU + softmax over 4096 columns, rewritten, run in
    a CUDA session with the library registered, against ORT's own run of the original model."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from tritonforge.runtime import ortlib
    from tritonforge.runtime.ortlib.rewrite import rewrite_file

    rng = np.random.default_rng(7)
    c, hw = 320, 64
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["gn"], num_groups=32, epsilon=1e-5,
                              name="down.0.norm1"),
             helper.make_node("Sigmoid", ["gn"], ["sig"]), helper.make_node("Mul", ["gn", "sig"], ["act"]),
             helper.make_node("Reshape", ["act", "shape"], ["rows"]),
             helper.make_node("Softmax", ["rows"], ["y"], axis=-1, name="attn")]
    inits = [numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float16), "s"),
             numpy_helper.from_array(rng.uniform(-1, 1, c).astype(np.float16), "b"),
             numpy_helper.from_array(np.array([c, hw * hw], np.int64), "shape")]
    f = TensorProto.FLOAT16
    graph = helper.make_graph(nodes, "unet_piece", [helper.make_tensor_value_info("x", f, [1, c, hw, hw])],
                              [helper.make_tensor_value_info("y", f, [c, hw * hw])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(tmp_path / "unet.onnx"))
    report = rewrite_file(tmp_path / "unet.onnx", tmp_path / "unet.tf.onnx", library)
    assert report.rewritten == {"GroupNormalization": 1, "Softmax": 1} and report.fused_silu == 1
    assert report.channels_last == 1  # rewrite_file's default layout: the NHWC GroupNorm between Transposes
    so = ort_cuda.SessionOptions()
    so.log_severity_level = 3
    ortlib.register(so, library)
    ours = ort_cuda.InferenceSession(str(tmp_path / "unet.tf.onnx"), so, providers=[CUDA])
    plain = ort_cuda.SessionOptions()
    plain.log_severity_level = 3
    theirs = ort_cuda.InferenceSession(str(tmp_path / "unet.onnx"), plain, providers=[CUDA])
    x = (rng.standard_normal((1, c, hw, hw)) * 2 + 1).astype(np.float16)
    a, b = (s.run(None, {"x": x})[0].astype(np.float64) for s in (ours, theirs))
    assert np.abs(a - b).max() < 2e-3 and abs(a.sum(-1).mean() - 1) < 1e-3
    kernels = {r["op"]: r["kernel"] for r in ortlib.choices(library)}
    assert "group_norm_silu_fp16" in kernels and "softmax_fp16" in kernels, kernels


# ---- MultiHeadAttention: every layout the rewrite writes, grouped heads, each dtype --------------------------
def _attention_session(ort, lib, dtype, layout, shapes, heads, kv_heads, causal=0):
    """fp32 q, k, v in `layout` -> Cast to `dtype` -> the library's MultiHeadAttention -> Cast to fp32."""
    from onnx import TensorProto, helper

    elem = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16, "fp32": TensorProto.FLOAT}[dtype]
    attrs = {"num_heads": heads, "unidirectional": causal}
    if kv_heads != heads:
        attrs["kv_num_heads"] = kv_heads
    if layout != "3d":
        attrs["layout"] = layout
    nodes = [helper.make_node("Cast", [t], [f"{t}c"], to=elem) for t in "qkv"]
    nodes += [helper.make_node("MultiHeadAttention", ["qc", "kc", "vc"], ["yc"], domain="tritonforge", **attrs),
              helper.make_node("Cast", ["yc"], ["y"], to=TensorProto.FLOAT)]
    m = helper.make_model(helper.make_graph(nodes, "attention", [vi(t, "fp32", list(shapes[t])) for t in "qkv"],
                                            [vi("y", "fp32", list(shapes["q"]))]),
                          opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("tritonforge", 1)])
    m.ir_version = 10
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.register_custom_ops_library(str(lib))
    return ort.InferenceSession(m.SerializeToString(), so, providers=[CUDA])


def _laid(x, layout):
    """(B, H, S, d) heads as the layout lays them."""
    b, _, s, _ = x.shape
    return {"3d": lambda: x.transpose(0, 2, 1, 3).reshape(b, s, -1), "BSHD": lambda: x.transpose(0, 2, 1, 3),
            "BHSD": lambda: x}[layout]()


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("layout", ["3d", "BSHD", "BHSD"])
@pytest.mark.parametrize("b, heads, kv_heads, sq, skv, d", [
    (2, 4, 4, 333, 333, 64),  # SD3's joint attention, fewer heads
    (1, 4, 4, 260, 260, 128),  # Flux's
    (2, 3, 3, 256, 77, 40),  # SD 1.5's cross-attention
    (1, 2, 2, 130, 66, 72),  # PixArt's head dim
    (1, 8, 2, 200, 150, 128)])  # grouped key/value heads
def test_multi_head_attention_matches_float64(ort_cuda, library, dtype, layout, b, heads, kv_heads, sq, skv, d):
    from tritonforge.runtime.ops.attention import attention_mismatch, attention_ref
    from tritonforge.runtime.reference import quantize

    rng = np.random.default_rng(sq + d)
    q, k, v = (rng.standard_normal((b, n, s, d)).astype(np.float32) for n, s in
               ((heads, sq), (kv_heads, skv), (kv_heads, skv)))
    feeds = {t: np.ascontiguousarray(_laid(x, layout)) for t, x in zip("qkv", (q, k, v))}
    s = _attention_session(ort_cuda, library, dtype, layout, {t: x.shape for t, x in feeds.items()}, heads, kv_heads)
    y = run_bound(ort_cuda, s, feeds, {"y": (list(feeds["q"].shape), np.float32)})["y"]
    ref = attention_ref(*(quantize(x, dtype) for x in (q, k, v)))
    heads_of = {"3d": lambda a: a.reshape(b, sq, heads, d).transpose(0, 2, 1, 3),
                "BSHD": lambda a: a.transpose(0, 2, 1, 3), "BHSD": lambda a: a}[layout]
    why = attention_mismatch(heads_of(y), ref, dtype)
    assert why is None, why


def _ada_session(ort, lib, dtype, shape, gated, out_sum=True, **clip):
    from onnx import TensorProto, helper

    t = {"fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT, "bf16": TensorProto.BFLOAT16}[dtype]
    row = [shape[0], 1, shape[2]]
    names = ["x", "s", "t", "b", "g", "bias"][:3 + 2 * bool(gated) + (gated == 2)]
    outs = ["y", "sum"] if gated and out_sum else ["y"]
    node = helper.make_node("AdaLayerNorm", names, outs, domain="tritonforge", epsilon=1e-6, **clip)
    ins = [helper.make_tensor_value_info(n, t, list(shape) if n in "xb" else [shape[2]] if n == "bias" else row)
           for n in names]
    return session(ort, lib, node, ins, [helper.make_tensor_value_info(o, t, None) for o in outs])


@pytest.mark.parametrize("gated", [0, 1, 2])
@pytest.mark.parametrize("shape", [(2, 4, 0), (2, 0, 64), (0, 4, 64)])  # no channels, no tokens, no items
def test_ada_layer_norm_of_nothing_is_nothing(ort_cuda, library, gated, shape):
    """A 0-sized X, a 0-wide normalized dim too, gives empty outputs of X's shape on the CUDA EP: nothing launched."""
    n, _, c = shape
    z = lambda *s: np.zeros(s, np.float16)  # noqa: E731
    feeds = {"x": z(*shape), "s": z(n, 1, c), "t": z(n, 1, c), **({"b": z(*shape), "g": z(n, 1, c)} if gated else {}),
             **({"bias": z(c)} if gated == 2 else {})}
    got = _ada_session(ort_cuda, library, "fp16", shape, gated).run(None, feeds)
    assert [o.shape for o in got] == [shape] * (2 if gated else 1)


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("gated", [0, 1, 2])  # 2: with the branch's bias
@pytest.mark.parametrize("shape", [(2, 4096, 1536), (2, 333, 1536), (1, 4608, 3072), (2, 300, 1152), (3, 7, 77)])
def test_ada_layer_norm_matches_float64(ort_cuda, library, dtype, gated, shape):
    """SD3's, Flux's and PixArt's token streams and an awkward one, the gated residual's sum written too."""
    from tritonforge.runtime.ops.ada_layer_norm import ada_layer_norm_mismatch, ada_layer_norm_ref
    from tritonforge.runtime.reference import quantize

    rng = np.random.default_rng(shape[1])
    x, b = ((rng.standard_normal(shape) * 2 + 0.5).astype(NP[dtype]) for _ in range(2))
    s, t, g = ((0.5 * rng.standard_normal((shape[0], 1, shape[2]))).astype(NP[dtype]) for _ in range(3))
    bias = rng.standard_normal(shape[2]).astype(NP[dtype])
    feeds = {"x": x, "s": s, "t": t, **({"b": b, "g": g} if gated else {}), **({"bias": bias} if gated == 2 else {})}
    outs = {"y": (list(shape), NP[dtype]), **({"sum": (list(shape), NP[dtype])} if gated else {})}
    got = run_bound(ort_cuda, _ada_session(ort_cuda, library, dtype, shape, gated), feeds, outs)
    q = lambda a: quantize(a.astype(np.float32), dtype)  # noqa: E731
    ref, total = ada_layer_norm_ref(q(x), q(s)[:, 0], q(t)[:, 0], 1e-6, q(b) if gated else None,
                                    q(g)[:, 0] if gated else None, q(bias) if gated == 2 else None)
    assert ada_layer_norm_mismatch(got["y"], ref, dtype) is None, ada_layer_norm_mismatch(got["y"], ref, dtype)
    if gated:
        assert ada_layer_norm_mismatch(got["sum"], total, dtype) is None


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("shape", [(2, 4096, 320), (2, 64, 1280), (8192, 640)])
def test_ada_layer_norm_with_one_row_for_all_matches_float64(ort_cuda, library, dtype, shape):
    """A UNet block's first norm as the rewrite writes it: its affine the modulation, (C) for every item and token."""
    from onnx import TensorProto, helper
    from tritonforge.runtime.ops.ada_layer_norm import ada_layer_norm_mismatch, ada_layer_norm_ref
    from tritonforge.runtime.reference import quantize

    t = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[dtype]
    c = shape[-1]
    casts = [helper.make_node("Cast", [v], [v + "t"], to=t) for v in "xst"]
    nodes = [*casts, helper.make_node("AdaLayerNorm", ["xt", "st", "tt"], ["yt"], domain="tritonforge", epsilon=1e-5),
             helper.make_node("Cast", ["yt"], ["y"], to=TensorProto.FLOAT)]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
           *(helper.make_tensor_value_info(v, TensorProto.FLOAT, [c]) for v in "st")]
    sess = session(ort_cuda, library, nodes, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    rng = np.random.default_rng(c)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    s, b = (rng.uniform(-0.5, 0.5, c).astype(np.float32) for _ in range(2))
    got = run_bound(ort_cuda, sess, {"x": x, "s": s, "t": b}, {"y": (list(shape), np.float32)})
    q = lambda a: quantize(a, dtype)  # noqa: E731
    x3 = q(x).reshape(1, -1, c)
    ref, _ = ada_layer_norm_ref(x3, q(s)[None], q(b)[None], 1e-5)
    why = ada_layer_norm_mismatch(got["y"].reshape(ref.shape), ref, dtype)
    assert why is None, why


def _rotary_session(ort, lib, dtype, shape, cos_shape):
    from onnx import TensorProto, helper

    t = {"fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT, "bf16": TensorProto.BFLOAT16}[dtype]
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], domain="tritonforge")
    ins = [helper.make_tensor_value_info("x", t, list(shape)),
           *(helper.make_tensor_value_info(n, TensorProto.FLOAT, list(cos_shape)) for n in ("cos", "sin"))]
    return session(ort, lib, node, ins, [helper.make_tensor_value_info("y", t, None)])


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("shape, cos_shape", [
    ((1, 4608, 24, 128), (1, 4608, 1, 128)),  # Flux at 1024^2: image and text tokens, (B, S, H, D) heads
    ((2, 24, 333, 64), (333, 64)),  # (B, H, S, D) heads
    ((2, 7, 3, 88), (1, 7, 1, 88)),  # a head dim that fills no block
    ((2, 300, 2048), (2, 300, 2048)),  # whole token rows, a row per token of each item
])
def test_rotary_embedding_matches_float64(ort_cuda, library, dtype, shape, cos_shape):
    from tritonforge.runtime.ops.rotary_embedding import rotary_embedding_mismatch, rotary_embedding_ref
    from tritonforge.runtime.reference import quantize

    rng = np.random.default_rng(shape[1])
    x = rng.standard_normal(shape).astype(NP[dtype])
    angle = rng.uniform(-np.pi, np.pi, cos_shape)
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    got = run_bound(ort_cuda, _rotary_session(ort_cuda, library, dtype, shape, cos_shape),
                    {"x": x, "cos": cos, "sin": sin}, {"y": (list(shape), NP[dtype])})
    ref = rotary_embedding_ref(quantize(x.astype(np.float32), dtype), cos.astype(np.float64), sin.astype(np.float64))
    why = rotary_embedding_mismatch(got["y"], ref, dtype)
    assert why is None, why


def _rotary_rms_session(ort, lib, dtype, a_shape, b_shape, cos_shape):
    """RotaryEmbedding with the q/k norm: X (and X_b joined on axis 1 where b_shape is given), gammas fp32."""
    from onnx import TensorProto, helper

    t = {"fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT}[dtype]
    names = ["x", "cos", "sin", "gamma", *(["xb", "gamma_b"] if b_shape else [])]
    node = helper.make_node("RotaryEmbedding", names, ["y"], domain="tritonforge", epsilon=1e-6,
                            **({"axis": 1} if b_shape else {}))
    shapes = {"x": a_shape, "xb": b_shape, "cos": cos_shape, "sin": cos_shape, "gamma": [a_shape[-1]],
              "gamma_b": [a_shape[-1]]}
    ins = [helper.make_tensor_value_info(n, t if n in ("x", "xb") else TensorProto.FLOAT, list(shapes[n]))
           for n in names]
    return session(ort, lib, node, ins, [helper.make_tensor_value_info("y", t, None)])


def rotary_rms_case(dtype, a_shape, b_shape, seed):
    """Feeds of the q/k-norm rotation (X_b where b_shape is given; cos and sin one row per joined token) and the
    float64 output."""
    from tritonforge.runtime.ops.rotary_embedding import rms_norm_ref, rotary_embedding_ref
    from tritonforge.runtime.reference import quantize

    rng = np.random.default_rng(seed)
    d, tokens = a_shape[-1], a_shape[1] + (b_shape[1] if b_shape else 0)
    feeds = {"x": (rng.standard_normal(a_shape) * 4).astype(NP[dtype]),
             "gamma": rng.uniform(0.5, 1.5, d).astype(np.float32)}
    if b_shape:
        feeds.update(xb=rng.standard_normal(b_shape).astype(NP[dtype]), gamma_b=rng.uniform(0.5, 1.5, d).astype(
            np.float32))
    angle = rng.uniform(-np.pi, np.pi, (1, tokens, 1, d))
    feeds.update(cos=np.cos(angle).astype(np.float32), sin=np.sin(angle).astype(np.float32))
    x = rms_norm_ref(quantize(feeds["x"].astype(np.float32), dtype), feeds["gamma"].astype(np.float64), 1e-6)
    if b_shape:
        x = np.concatenate([x, rms_norm_ref(quantize(feeds["xb"].astype(np.float32), dtype),
                                            feeds["gamma_b"].astype(np.float64), 1e-6)], axis=1)
    return feeds, rotary_embedding_ref(x, feeds["cos"].astype(np.float64), feeds["sin"].astype(np.float64))


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("a_shape, b_shape", [
    ((1, 512, 24, 128), (1, 4096, 24, 128)),  # Flux's double block at 1024^2: text then image heads
    ((1, 4608, 24, 128), None),  # its single blocks: both, normed with one gamma
    ((2, 7, 3, 88), (2, 5, 3, 88)),  # a head dim that fills no block, a join inside a tile
    ((2, 13, 3, 64), None),
])
def test_rotary_embedding_with_its_q_k_norm_matches_float64(ort_cuda, library, dtype, a_shape, b_shape):
    from tritonforge.runtime.ops.rotary_embedding import rotary_embedding_mismatch

    feeds, ref = rotary_rms_case(dtype, a_shape, b_shape, a_shape[1])
    cos_shape = feeds["cos"].shape
    got = run_bound(ort_cuda, _rotary_rms_session(ort_cuda, library, dtype, a_shape, b_shape, cos_shape), feeds,
                    {"y": (list(ref.shape), NP[dtype])})
    why = rotary_embedding_mismatch(got["y"], ref, dtype)
    assert why is None, why


@pytest.mark.parametrize("gated", [1, 2])
def test_ada_layer_norm_clips_the_gated_sum(ort_cuda, library, gated):
    """Flux's fp16 single block stream, its sum clipped (bounds that cut here, as fp16's range cuts a sum past it)."""
    from tritonforge.runtime.ops.ada_layer_norm import ada_layer_norm_mismatch, ada_layer_norm_ref
    from tritonforge.runtime.reference import quantize

    shape, clip = (1, 4608, 3072), (-2.5, 3.0)
    rng = np.random.default_rng(11)
    x, b = ((rng.standard_normal(shape) * 2 + 0.5).astype(np.float16) for _ in range(2))
    s, t, g = ((0.5 * rng.standard_normal((1, 1, shape[2]))).astype(np.float16) for _ in range(3))
    bias = rng.standard_normal(shape[2]).astype(np.float16)
    feeds = {"x": x, "s": s, "t": t, "b": b, "g": g, **({"bias": bias} if gated == 2 else {})}
    sess = _ada_session(ort_cuda, library, "fp16", shape, gated, clip_min=clip[0], clip_max=clip[1])
    got = run_bound(ort_cuda, sess, feeds, {"y": (list(shape), np.float16), "sum": (list(shape), np.float16)})
    q = lambda a: quantize(a.astype(np.float32), "fp16")  # noqa: E731
    ref, total = ada_layer_norm_ref(q(x), q(s)[:, 0], q(t)[:, 0], 1e-6, q(b), q(g)[:, 0],
                                    q(bias) if gated == 2 else None, clip)
    assert ada_layer_norm_mismatch(got["y"], ref, "fp16") is None, ada_layer_norm_mismatch(got["y"], ref, "fp16")
    assert ada_layer_norm_mismatch(got["sum"], total, "fp16") is None
    assert got["sum"].min() == clip[0] and got["sum"].max() == clip[1]


def _bias_concat_session(ort, lib, dtype, a_shape, b_shape):
    from onnx import TensorProto, helper

    t = {"fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT, "bf16": TensorProto.BFLOAT16}[dtype]
    node = helper.make_node("BiasConcat", ["a", "b", "ba", "bb"], ["y"], domain="tritonforge")
    ins = [helper.make_tensor_value_info("a", t, list(a_shape)), helper.make_tensor_value_info("b", t, list(b_shape)),
           *(helper.make_tensor_value_info(n, t, [a_shape[2]]) for n in ("ba", "bb"))]
    return session(ort, lib, node, ins, [helper.make_tensor_value_info("y", t, None)])


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("items, image, text, c", [(2, 4096, 333, 1536), (1, 4096, 512, 3072), (3, 7, 5, 77)])
def test_bias_concat_matches_float64(ort_cuda, library, dtype, items, image, text, c):
    """SD3's and Flux's joint attention streams, and an awkward one."""
    from tritonforge.runtime.ops.bias_concat import bias_concat_mismatch, bias_concat_ref

    rng = np.random.default_rng(c)
    a, b = (rng.standard_normal((items, s, c)).astype(NP[dtype]) for s in (image, text))
    ba, bb = (rng.standard_normal(c).astype(NP[dtype]) for _ in range(2))
    got = run_bound(ort_cuda, _bias_concat_session(ort_cuda, library, dtype, a.shape, b.shape),
                    {"a": a, "b": b, "ba": ba, "bb": bb}, {"y": ([items, image + text, c], NP[dtype])})
    ref = bias_concat_ref(*(v.astype(np.float64) for v in (a, b, ba, bb)))
    assert bias_concat_mismatch(got["y"], ref, dtype) is None, bias_concat_mismatch(got["y"], ref, dtype)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("shape, graph", [
    ((2, 4096, 2560), True),  # SD 1.5's first level, in ORT's CUDA graph
    ((2, 1024, 10240), False),  # SDXL's lowest level
    ((3, 7, 90), False),  # a half width of no vector: rows 2-byte aligned
])
def test_bias_split_gelu_matches_float64(ort_cuda, library, dtype, shape, graph):
    """fp32 in, ORT's Cast to the dtype, the library's BiasSplitGelu, Cast back; against float64 of the rounded
    inputs."""
    from onnx import TensorProto, helper
    from tritonforge.runtime.ops.bias_split_gelu import bias_split_gelu_mismatch, bias_split_gelu_ref
    from tritonforge.runtime.reference import quantize

    t = {"fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT, "bf16": TensorProto.BFLOAT16}[dtype]
    nodes = [*(helper.make_node("Cast", [v], [v + "t"], to=t) for v in "xb"),
             helper.make_node("BiasSplitGelu", ["xt", "bt"], ["yt"], domain="tritonforge"),
             helper.make_node("Cast", ["yt"], ["y"], to=TensorProto.FLOAT)]
    half = [*shape[:-1], shape[-1] // 2]
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape)),
           helper.make_tensor_value_info("b", TensorProto.FLOAT, [shape[-1]])]
    sess = session(ort_cuda, library, nodes, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, half)],
                   graph=graph)
    rng = np.random.default_rng(shape[-1])
    x = rng.standard_normal(shape).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, shape[-1]).astype(np.float32)
    got = run_bound(ort_cuda, sess, {"x": x, "b": b}, {"y": (half, np.float32)})
    ref = bias_split_gelu_ref(quantize(x, dtype), quantize(b, dtype))
    why = bias_split_gelu_mismatch(got["y"], ref, dtype)
    assert why is None, why


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("lead, k, n, activation, graph", [
    ((2, 4096), 1536, 6144, "gelu_tanh", True),  # SD3's MLP up, in ORT's CUDA graph
    ((2, 333), 1536, 1536, "none", False),  # SD3's text-stream projection
    ((4608,), 15360, 3072, "none", False),  # Flux's single blocks' output projection, 2-D
    ((3, 7), 77, 45, "gelu_tanh", False),  # odd K and N: rows 2-byte aligned
])
def test_linear_matches_float64(ort_cuda, library, dtype, lead, k, n, activation, graph):
    """fp32 in, ORT's Cast to the dtype (bf16 too), the library's Linear (cuBLASLt), Cast back; rows sampled against
    float64 of the rounded inputs."""
    from onnx import TensorProto, helper
    from tritonforge.runtime.reference import quantize

    t = {"fp16": TensorProto.FLOAT16, "fp32": TensorProto.FLOAT, "bf16": TensorProto.BFLOAT16}[dtype]
    rng = np.random.default_rng(k + n)
    x = rng.standard_normal((*lead, k)).astype(np.float32)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    nodes = [*(helper.make_node("Cast", [v], [v + "t"], to=t) for v in "xwb"),
             helper.make_node("Linear", ["xt", "wt", "bt"], ["yt"], domain="tritonforge", activation=activation),
             helper.make_node("Cast", ["yt"], ["y"], to=TensorProto.FLOAT)]
    m = helper.make_model(helper.make_graph(nodes, "linear", [vi("x", "fp32", list(x.shape)), vi("w", "fp32", [k, n]),
                                                              vi("b", "fp32", [n])],
                                            [vi("y", "fp32", [*lead, n])]),
                          opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("tritonforge", 1)])
    m.ir_version = 10
    so = ort_cuda.SessionOptions()
    so.log_severity_level = 3
    so.register_custom_ops_library(str(library))
    opts = {"enable_cuda_graph": "1", "use_tf32": "0"} if graph else {"use_tf32": "0"}
    s = ort_cuda.InferenceSession(m.SerializeToString(), so, providers=[(CUDA, opts)])
    y = run_bound(ort_cuda, s, {"x": x, "w": w, "b": b}, {"y": ([*lead, n], np.float32)})["y"].reshape(-1, n)
    rows = np.unique(np.r_[0, rng.integers(0, y.shape[0], 61), y.shape[0] - 1])
    q = (lambda a: a.astype(np.float64)) if dtype == "fp32" else (lambda a: quantize(a, dtype))
    ref = q(x).reshape(-1, k)[rows] @ q(w) + q(b)
    if activation == "gelu_tanh":
        ref = 0.5 * ref * (1 + np.tanh(np.sqrt(2 / np.pi) * (ref + 0.044715 * ref ** 3)))
    tol = {"fp16": 1e-2, "bf16": 4e-2, "fp32": 1e-4}[dtype]
    np.testing.assert_allclose(y[rows], ref, atol=tol, rtol=tol)


@pytest.mark.parametrize("path", ["fp8", "dequantize"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("lead, k, n, activation, graph", [
    ((2, 4096), 1536, 6144, "gelu_tanh", True),  # SD3's MLP up, in ORT's CUDA graph
    ((2, 333), 1536, 1536, "none", False),  # SD3's text-stream projection: rows not a multiple of any tile
    ((4608,), 15360, 3072, "none", False),  # Flux's single blocks' output projection, 2-D
    ((0, 7), 64, 32, "none", False),  # no tokens
])
def test_fp8_linear_matches_float64_of_its_quantized_operands(ort_cuda, library, monkeypatch, path, dtype, lead, k,
                                                               n, activation, graph):
    """The e4m3 weight as the rewrite writes it, X cast to the dtype, the library's Fp8Linear (X's rows quantized
    by kernels/fp8_quant_rows_triton.py, cuBLASLt's fp8 GEMM with both scales, the bias and the GELU in its
    epilogue): rows sampled against float64 of X's e4m3 rows times their scales (numpy's quantization, as the
    kernel's) and the dequantized weight, within the output dtype's rounding. `dequantize`: the path of GPUs
    without fp8 tensor cores (TRITONFORGE_ORT_FP8=dequantize takes it on any GPU), X unquantized by the weight
    dequantized into X's type."""
    from onnx import TensorProto, helper
    from tritonforge.runtime.ortlib.fp8 import from_e4m3_bytes, quantize_rows
    from tritonforge.runtime.reference import quantize

    if path == "fp8" and not _has_fp8(ort_cuda):
        pytest.skip("this GPU has no fp8 tensor cores (sm_89+)")
    if path == "dequantize":
        monkeypatch.setenv("TRITONFORGE_ORT_FP8", "dequantize")
    t = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[dtype]
    rng = np.random.default_rng(k + n + 1)
    x = (rng.standard_normal((*lead, k)) * rng.uniform(0.1, 4, (*lead, 1))).astype(np.float32)
    w = rng.standard_normal((k, n)) / np.sqrt(k) * rng.uniform(0.2, 2, n)
    b = rng.standard_normal(n).astype(np.float32)
    wq, ws = quantize_rows(w.T)
    inits = [helper.make_tensor("wq", TensorProto.FLOAT8E4M3FN, wq.shape, wq.tobytes(), raw=True),
             helper.make_tensor("ws", TensorProto.FLOAT, ws.shape, ws)]
    nodes = [*(helper.make_node("Cast", [v], [v + "t"], to=t) for v in "xb"),
             helper.make_node("Fp8Linear", ["xt", "wq", "ws", "bt"], ["yt"], domain="tritonforge",
                              activation=activation, name="ff"),
             helper.make_node("Cast", ["yt"], ["y"], to=TensorProto.FLOAT)]
    m = helper.make_model(helper.make_graph(nodes, "fp8", [vi("x", "fp32", list(x.shape)), vi("b", "fp32", [n])],
                                            [vi("y", "fp32", [*lead, n])], inits),
                          opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("tritonforge", 1)])
    m.ir_version = 10
    so = ort_cuda.SessionOptions()
    so.log_severity_level = 3
    so.register_custom_ops_library(str(library))
    s = ort_cuda.InferenceSession(m.SerializeToString(), so,
                                  providers=[(CUDA, {"enable_cuda_graph": "1"} if graph else {})])
    y = run_bound(ort_cuda, s, {"x": x, "b": b}, {"y": ([*lead, n], np.float32)})["y"].reshape(-1, n)
    if y.size == 0:
        return
    rows = np.unique(np.r_[0, rng.integers(0, y.shape[0], 61), y.shape[0] - 1])
    xt = quantize(x, dtype).reshape(-1, k)[rows]
    wt = (from_e4m3_bytes(wq) * ws[:, None]).T
    if path == "fp8":
        xq, xs = quantize_rows(xt)
        xt = from_e4m3_bytes(xq) * xs[:, None]
    else:
        wt = quantize(wt, dtype)
    ref = xt @ wt + quantize(b, dtype)
    if activation == "gelu_tanh":
        ref = 0.5 * ref * (1 + np.tanh(np.sqrt(2 / np.pi) * (ref + 0.044715 * ref ** 3)))
    tol = {"fp16": 1e-2, "bf16": 4e-2}[dtype]
    np.testing.assert_allclose(y[rows], ref, atol=tol * np.abs(ref).max(), rtol=tol)


def _has_fp8(ort_cuda) -> bool:
    import subprocess

    cap = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.split()
    return bool(cap) and float(cap[0]) >= 8.9
