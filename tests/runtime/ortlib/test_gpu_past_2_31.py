"""Every op of the custom-op library past 2^31 elements in onnxruntime-gpu's CUDA EP (a 4K-class decode's
GroupNorm, a long video's token stream): rows past the 2^31st element come out right against float64, and a
second session runs after it (a kernel that addressed out of bounds would have poisoned the CUDA context)."""

from __future__ import annotations

import numpy as np
import pytest

from ..conftest import skip_unless_memory
from .test_gpu_ops import (
    _ada_session,
    _bias_concat_session,
    _rotary_rms_session,
    _rotary_session,
    run_bound,
    session,
    vi,
)

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("one_at_a_time")]

PAST = 2**31
NHWC = (2, 2900, 2900, 128)  # 2.153e9 elements: image 1's last 42784 pixels lie past 2^31
ROWS, COLS = 540_000, 4096  # 2.212e9 elements: rows from 524288 on lie past 2^31


def wide(shape, period: int, seed: int) -> np.ndarray:
    """fp16 of `shape`: `period` random rows of the last axis over and over, each row made its own by a ramp
    in its first value (a kernel that read the wrong row would show)."""
    rng = np.random.default_rng(seed)
    x = np.resize(rng.standard_normal((period, shape[-1])).astype(np.float16), shape)
    flat = x.reshape(-1, shape[-1])
    flat[:, 0] = (np.arange(flat.shape[0]) % 4093 / 1000.0).astype(np.float16)
    return x


def assert_context_usable(ort, lib):
    """A fresh session of the library runs a small softmax right."""
    from onnx import helper
    from tritonforge.runtime.ops.softmax import softmax_ref
    from tritonforge.runtime.reference import assert_close

    x = np.random.default_rng(5).standard_normal((4, 77)).astype(np.float32)
    s = session(ort, lib, helper.make_node("Softmax", ["x"], ["y"], domain="tritonforge"), [vi("x", "fp32", [4, 77])],
                [vi("y", "fp32", [4, 77])])
    assert_close(s.run(None, {"x": x})[0], softmax_ref(x.astype(np.float64), False), "fp32", False, "after")


def nhwc_rows(rows, c):
    assert (rows.max() + 1) * c > PAST, "no checked pixel lies past 2^31 elements"
    return rows


def test_group_norm_nhwc_past_2_31_elements(cuda, ort_cuda, library):
    skip_unless_memory(cuda, 2 * 2 * np.prod(NHWC), "GroupNorm past 2^31 elements")
    from onnx import helper
    from tritonforge.runtime.ops.group_norm import GroupNormProblem, group_norm_mismatch, sampled_reference

    n, h, w, c = NHWC
    x = wide(NHWC, 997, 1)
    x[1] = x[1] * 2 + 1  # the images' statistics differ
    rng = np.random.default_rng(2)
    gamma, beta = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    node = helper.make_node("GroupNorm", ["x", "g", "b"], ["y"], domain="tritonforge", groups=32, activation=1)
    s = session(ort_cuda, library, node, [vi("x", "fp16", list(NHWC)), vi("g", "fp32", [c]), vi("b", "fp32", [c])],
                [vi("y", "fp16", list(NHWC))])
    y = run_bound(ort_cuda, s, {"x": x, "g": gamma, "b": beta}, {"y": (list(NHWC), np.float16)})["y"]
    del s
    p = GroupNormProblem("fp16", n, h * w, c, 32, silu=True)
    rows, ref = sampled_reference(x.reshape(-1, c), gamma, beta, p, rng)
    why = group_norm_mismatch(y.reshape(-1, c)[nhwc_rows(rows, c)], ref, "fp16")
    assert why is None, why
    del x, y
    assert_context_usable(ort_cuda, library)


def test_a_value_past_a_kernels_i32_argument_is_refused_naming_it(cuda, ort_cuda, library):
    """One channel over 65536 x 32769 pixels: H*W (2^31 + 2^16) is past the kernels' i32 `img_size` (the contract's
    `hw`). Every candidate is refused before launch with the kernel and the argument named (it was cut to 32 bits and
    launched), and a second session runs after it."""
    shape = (1, 65536, 32769, 1)
    skip_unless_memory(cuda, 2 * 2 * np.prod(shape), "GroupNorm with H*W past the i32 range")
    from onnx import helper

    node = helper.make_node("GroupNorm", ["x", "g", "b"], ["y"], domain="tritonforge", groups=1, activation=1)
    s = session(ort_cuda, library, node, [vi("x", "fp16", list(shape)), vi("g", "fp32", [1]), vi("b", "fp32", [1])],
                [vi("y", "fp16", list(shape))])
    x = np.ones(shape, np.float16)
    with pytest.raises(Exception, match=r"GroupNorm\w*: argument 'img_size' = 2147549184 is past its i32"):
        run_bound(ort_cuda, s, {"x": x, "g": np.ones(1, np.float32), "b": np.zeros(1, np.float32)},
                  {"y": (list(shape), np.float16)})
    del s, x
    assert_context_usable(ort_cuda, library)


def test_skip_group_norm_past_2_31_elements(cuda, ort_cuda, library):
    """Skip per image and channel (the UNet's time embedding) and a bias; both outputs checked."""
    skip_unless_memory(cuda, 3 * 2 * np.prod(NHWC), "SkipGroupNorm past 2^31 elements")
    from onnx import helper
    from tritonforge.runtime.ops.group_norm import GroupNormProblem, group_norm_mismatch, sampled_reference

    n, h, w, c = NHWC
    x = wide(NHWC, 991, 3)
    rng = np.random.default_rng(4)
    skip = rng.standard_normal((n, c)).astype(np.float16)
    bias = rng.standard_normal(c).astype(np.float16)
    gamma, beta = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    node = helper.make_node("SkipGroupNorm", ["x", "g", "b", "skip", "bias"], ["y", "s"], domain="tritonforge",
                            groups=32, activation=1)
    s = session(ort_cuda, library, node,
                [vi("x", "fp16", list(NHWC)), vi("g", "fp32", [c]), vi("b", "fp32", [c]), vi("skip", "fp16", [n, c]),
                 vi("bias", "fp16", [c])], [vi("y", "fp16", list(NHWC)), vi("s", "fp16", list(NHWC))])
    out = run_bound(ort_cuda, s, {"x": x, "g": gamma, "b": beta, "skip": skip, "bias": bias},
                    {"y": (list(NHWC), np.float16), "s": (list(NHWC), np.float16)})
    del s
    total = x.astype(np.float32)
    total += skip.astype(np.float32)[:, None, None, :] + bias.astype(np.float32)
    del x
    p = GroupNormProblem("fp32", n, h * w, c, 32, silu=True)  # statistics of the fp32 sum
    rows, ref = sampled_reference(total.reshape(-1, c), gamma, beta, p, rng)
    rows = nhwc_rows(rows, c)
    why = group_norm_mismatch(out["s"].reshape(-1, c)[rows], total.reshape(-1, c)[rows].astype(np.float64), "fp16")
    assert why is None, f"s: {why}"
    why = group_norm_mismatch(out["y"].reshape(-1, c)[rows], ref, "fp16")
    assert why is None, f"y: {why}"
    del out, total
    assert_context_usable(ort_cuda, library)


def test_group_normalization_nchw_past_2_31_elements(cuda, ort_cuda, library):
    """(2, 128, 2900, 2900): each of the 64 (image, group) spans whole against float64; the last one
    crosses 2^31, the one before lies below it."""
    skip_unless_memory(cuda, 2 * 2 * np.prod(NHWC), "GroupNormalization past 2^31 elements")
    from onnx import helper
    from tritonforge.runtime.ops.group_norm import group_norm_mismatch

    n, c, groups = 2, 128, 32
    shape = (n, c, 2900, 2900)
    x = wide(shape, 13, 6)  # rows of 2900 values
    rng = np.random.default_rng(7)
    scale, bias = rng.uniform(0.5, 1.5, c).astype(np.float32), rng.uniform(-1, 1, c).astype(np.float32)
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], domain="tritonforge", num_groups=groups,
                            activation=1)
    s = session(ort_cuda, library, node, [vi("x", "fp16", list(shape)), vi("s", "fp32", [c]), vi("b", "fp32", [c])],
                [vi("y", "fp16", list(shape))])
    y = run_bound(ort_cuda, s, {"x": x, "s": scale, "b": bias}, {"y": (list(shape), np.float16)})["y"]
    del s
    cpg, span = c // groups, x[0, 0].size * (c // groups)
    spans_x, spans_y = x.reshape(n * groups, span), y.reshape(n * groups, span)
    for i in (0, groups - 1, n * groups - 2, n * groups - 1):
        v = spans_x[i].astype(np.float64)
        v = (v - v.mean()) / np.sqrt(v.var() + 1e-5)
        ch = (i % groups) * cpg + np.arange(cpg)
        ref = v.reshape(cpg, -1) * scale[ch, None] + bias[ch, None]
        ref = ref / (1 + np.exp(-ref))
        why = group_norm_mismatch(spans_y[i].reshape(cpg, -1), ref, "fp16")
        assert why is None, f"(image, group) {divmod(i, groups)}: {why}"
    assert n * groups * span > PAST > (n * groups - 1) * span
    del x, y
    assert_context_usable(ort_cuda, library)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_past_2_31_elements(cuda, ort_cuda, library, op):
    skip_unless_memory(cuda, 2 * 2 * ROWS * COLS, "Softmax past 2^31 elements")
    from onnx import helper
    from tritonforge.runtime.ops.softmax import softmax_ref
    from tritonforge.runtime.reference import mismatch

    x = wide((ROWS, COLS), 997, 8)
    s = session(ort_cuda, library, helper.make_node(op, ["x"], ["y"], domain="tritonforge"),
                [vi("x", "fp16", [ROWS, COLS])], [vi("y", "fp16", [ROWS, COLS])])
    y = run_bound(ort_cuda, s, {"x": x}, {"y": ([ROWS, COLS], np.float16)})["y"]
    del s
    edge = PAST // COLS
    rows = np.array([0, 1, edge - 1, edge, edge + 1, (edge + ROWS) // 2, ROWS - 2, ROWS - 1])
    log = op == "LogSoftmax"
    why = mismatch(y[rows], softmax_ref(x[rows].astype(np.float64), log), "fp16", log)
    assert why is None, why
    del x, y
    assert_context_usable(ort_cuda, library)


def test_attention_past_2_31_elements_is_right_and_leaves_the_context_usable(cuda, ort_cuda, library):
    """A query of 600000 tokens x 4096 channels in fp16 (2.46e9 elements: a long video's or a 4K image's
    sequence) over 77 keys: rows past 2^31 / 4096 come out right, and a second session runs after it."""
    skip_unless_memory(cuda, 2 * 2 * 600000 * 4096, "MultiHeadAttention past 2^31 elements")
    from tritonforge.runtime.ops.attention import attention_mismatch, attention_ref

    b, sq, skv, heads, d = 1, 600000, 77, 32, 128
    rng = np.random.default_rng(31)
    q = wide((b, sq, heads * d), 997, 30)
    k, v = (rng.standard_normal((b, skv, heads * d)).astype(np.float16) for _ in range(2))
    from onnx import TensorProto, helper

    node = helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="tritonforge", num_heads=heads)
    t = TensorProto.FLOAT16
    ins = [helper.make_tensor_value_info(n, t, list(x.shape)) for n, x in (("q", q), ("k", k), ("v", v))]
    s = session(ort_cuda, library, node, ins, [helper.make_tensor_value_info("y", t, None)])
    y = run_bound(ort_cuda, s, {"q": q, "k": k, "v": v}, {"y": (list(q.shape), np.float16)})["y"]
    rows = np.array([0, 1, 2 ** 31 // (heads * d) - 1, 2 ** 31 // (heads * d), 2 ** 31 // (heads * d) + 1,
                     sq // 2 + 12345, sq - 2, sq - 1])
    split = lambda a: a.astype(np.float64).reshape(a.shape[0], -1, heads, d).transpose(0, 2, 1, 3)
    ref = attention_ref(split(q[:, rows]), split(k), split(v))
    why = attention_mismatch(split(y[:, rows]), ref, "fp16")
    assert why is None, why
    del y, q, s
    assert_context_usable(ort_cuda, library)


def test_ada_layer_norm_past_2_31_elements_is_right_and_leaves_the_context_usable(cuda, ort_cuda, library):
    """1.4 million tokens x 1536 channels in fp16 (2.15e9 elements, a long video's sequence): rows past
    2^31 / 1536 come out right, and a second session runs after it."""
    skip_unless_memory(cuda, 2 * 2 * 1_400_000 * 1536, "AdaLayerNorm past 2^31 elements")
    from tritonforge.runtime.ops.ada_layer_norm import ada_layer_norm_mismatch, ada_layer_norm_ref

    shape = (1, 1_400_000, 1536)
    rng = np.random.default_rng(7)
    x = wide(shape, 991, 6)
    s, t = ((0.5 * rng.standard_normal((1, 1, shape[2]))).astype(np.float16) for _ in range(2))
    y = run_bound(ort_cuda, _ada_session(ort_cuda, library, "fp16", shape, 0), {"x": x, "s": s, "t": t},
                  {"y": (list(shape), np.float16)})["y"]
    rows = np.array([0, 1, 2 ** 31 // shape[2] - 1, 2 ** 31 // shape[2], 2 ** 31 // shape[2] + 1, shape[1] - 1])
    ref, _ = ada_layer_norm_ref(x[:, rows].astype(np.float64), s[:, 0].astype(np.float64),
                                t[:, 0].astype(np.float64), 1e-6)
    why = ada_layer_norm_mismatch(y[:, rows], ref, "fp16")
    assert why is None, why
    del x, y
    assert_context_usable(ort_cuda, library)


def test_rotary_embedding_past_2_31_elements_is_right_and_leaves_the_context_usable(cuda, ort_cuda, library):
    """Flux's heads over 700,000 tokens in fp16 (24 x 128 each: 2.15e9 elements, a long video's sequence): rows
    past 2^31 / 128 come out right, and a second session runs after it."""
    skip_unless_memory(cuda, 2 * 2 * 700_000 * 24 * 128, "RotaryEmbedding past 2^31 elements")
    from tritonforge.runtime.ops.rotary_embedding import rotary_embedding_mismatch, rotary_embedding_ref

    shape, cos_shape = (1, 700_000, 24, 128), (1, 700_000, 1, 128)
    x = wide(shape, 991, 8)
    angle = np.random.default_rng(9).uniform(-np.pi, np.pi, cos_shape)
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    y = run_bound(ort_cuda, _rotary_session(ort_cuda, library, "fp16", shape, cos_shape),
                  {"x": x, "cos": cos, "sin": sin}, {"y": (list(shape), np.float16)})["y"]
    tokens = np.array([0, 1, 2 ** 31 // (24 * 128) - 1, 2 ** 31 // (24 * 128), 2 ** 31 // (24 * 128) + 1,
                       shape[1] - 1])
    ref = rotary_embedding_ref(x[:, tokens].astype(np.float64), cos[:, tokens].astype(np.float64),
                               sin[:, tokens].astype(np.float64))
    why = rotary_embedding_mismatch(y[:, tokens], ref, "fp16")
    assert why is None, why
    del x, y
    assert_context_usable(ort_cuda, library)


def test_rotary_embedding_with_its_joined_q_k_norms_past_2_31_elements_is_right(cuda, ort_cuda, library):
    """Flux's double-block join over 50,000 text and 650,000 image tokens of 24 x 128 heads in fp16 (the image
    stream and the output past 2^31 elements): rows past 2^31 / 128 of the output and of X_b come out right, and a
    second session runs after it."""
    skip_unless_memory(cuda, 2 * 2 * 700_000 * 24 * 128, "RotaryEmbedding with its norms past 2^31 elements")
    from tritonforge.runtime.ops.rotary_embedding import rms_norm_ref, rotary_embedding_mismatch, rotary_embedding_ref

    text, image, heads, d = 50_000, 650_000, 24, 128
    a, b = wide((1, text, heads, d), 997, 10), wide((1, image, heads, d), 991, 11)
    rng = np.random.default_rng(12)
    ga, gb = (rng.uniform(0.5, 1.5, d).astype(np.float32) for _ in range(2))
    angle = rng.uniform(-np.pi, np.pi, (1, text + image, 1, d))
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    y = run_bound(ort_cuda, _rotary_rms_session(ort_cuda, library, "fp16", a.shape, b.shape, cos.shape),
                  {"x": a, "xb": b, "gamma": ga, "gamma_b": gb, "cos": cos, "sin": sin},
                  {"y": ([1, text + image, heads, d], np.float16)})["y"]
    past = 2 ** 31 // (heads * d)
    tokens = np.array([0, text - 1, text, past - 1, past, past + 1, text + image - 1])
    first = tokens < text
    x = np.where(first[None, :, None, None],
                 rms_norm_ref(a[:, np.minimum(tokens, text - 1)].astype(np.float64), ga, 1e-6),
                 rms_norm_ref(b[:, np.maximum(tokens - text, 0)].astype(np.float64), gb, 1e-6))
    ref = rotary_embedding_ref(x, cos[:, tokens].astype(np.float64), sin[:, tokens].astype(np.float64))
    why = rotary_embedding_mismatch(y[:, tokens], ref, "fp16")
    assert why is None, why
    del a, b, y
    assert_context_usable(ort_cuda, library)


def test_bias_concat_past_2_31_elements_is_right_and_leaves_the_context_usable(cuda, ort_cuda, library):
    """A joint attention over 1.45 million image and 50,000 text tokens x 1536 in fp16 (the image stream and the
    output past 2^31 elements): image rows past 2^31 / 1536 and the text rows after them come out right, and a
    second session runs after it."""
    skip_unless_memory(cuda, 2 * 2 * 1_500_000 * 1536, "BiasConcat past 2^31 elements")
    from tritonforge.runtime.ops.bias_concat import bias_concat_mismatch

    sa, sb, c = 1_450_000, 50_000, 1536
    a, b = wide((1, sa, c), 991, 10), wide((1, sb, c), 997, 11)
    ba, bb = (np.random.default_rng(s).standard_normal(c).astype(np.float16) for s in (12, 13))
    y = run_bound(ort_cuda, _bias_concat_session(ort_cuda, library, "fp16", a.shape, b.shape),
                  {"a": a, "b": b, "ba": ba, "bb": bb}, {"y": ([1, sa + sb, c], np.float16)})["y"]
    cut = 2 ** 31 // c
    rows = [0, 1, cut - 1, cut, cut + 1, sa - 1, sa, sa + sb - 1]
    ref = np.stack([a[0, r].astype(np.float64) + ba if r < sa else b[0, r - sa].astype(np.float64) + bb
                    for r in rows])[None]
    why = bias_concat_mismatch(y[:, rows], ref, "fp16")
    assert why is None, why
    del a, b, y
    assert_context_usable(ort_cuda, library)


def test_bias_split_gelu_past_2_31_elements_is_right_and_leaves_the_context_usable(cuda, ort_cuda, library):
    """A GEGLU over 850,000 tokens x 2 x 1280 in fp16 (the input 2.18e9 elements, the output 1.09e9): rows past
    2^31 / 2560 come out right, and a second session runs after it."""
    skip_unless_memory(cuda, 2 * 3 * 850_000 * 1280, "BiasSplitGelu past 2^31 elements")
    from onnx import helper
    from tritonforge.runtime.ops.bias_split_gelu import bias_split_gelu_mismatch, bias_split_gelu_ref

    shape, width = (1, 850_000, 2560), 2560
    x = wide(shape, 991, 14)
    b = np.random.default_rng(15).uniform(-0.5, 0.5, width).astype(np.float16)
    node = helper.make_node("BiasSplitGelu", ["x", "b"], ["y"], domain="tritonforge")
    half = [1, shape[1], width // 2]
    s = session(ort_cuda, library, node, [vi("x", "fp16", list(shape)), vi("b", "fp16", [width])],
                [vi("y", "fp16", half)])
    y = run_bound(ort_cuda, s, {"x": x, "b": b}, {"y": (half, np.float16)})["y"]
    del s
    cut = 2 ** 31 // width
    rows = np.array([0, 1, cut - 1, cut, cut + 1, shape[1] - 1])
    ref = bias_split_gelu_ref(x[:, rows].astype(np.float64), b.astype(np.float64))
    why = bias_split_gelu_mismatch(y[:, rows], ref, "fp16")
    assert why is None, why
    del x, y
    assert_context_usable(ort_cuda, library)


def test_linear_past_2_31_elements_is_right_and_leaves_the_context_usable(cuda, ort_cuda, library):
    """A Linear of 2.2 million tokens x 64 to 1024 channels in fp16 (the output 2.25e9 elements): rows past
    2^31 / 1024 come out right, with the GELU; and a second session runs after it."""
    skip_unless_memory(cuda, 2 * 2_200_000 * (64 + 1024) * 2, "Linear past 2^31 elements")
    from onnx import helper

    m, k, n = 2_200_000, 64, 1024
    x = wide((m, k), 983, 14)
    rng = np.random.default_rng(15)
    w, b = (rng.standard_normal((k, n)) / 8).astype(np.float16), rng.standard_normal(n).astype(np.float16)
    node = helper.make_node("Linear", ["x", "w", "b"], ["y"], domain="tritonforge", activation="gelu_tanh")
    s = session(ort_cuda, library, node, [vi("x", "fp16", [m, k]), vi("w", "fp16", [k, n]), vi("b", "fp16", [n])],
                [vi("y", "fp16", [m, n])])
    y = run_bound(ort_cuda, s, {"x": x, "w": w, "b": b}, {"y": ([m, n], np.float16)})["y"]
    cut = PAST // n
    rows = [0, 1, cut - 1, cut, cut + 1, m - 1]
    v = x[rows].astype(np.float64) @ w.astype(np.float64) + b.astype(np.float64)
    ref = 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
    np.testing.assert_allclose(y[rows].astype(np.float64), ref, atol=2e-2, rtol=2e-2)
    del x, y
    assert_context_usable(ort_cuda, library)
