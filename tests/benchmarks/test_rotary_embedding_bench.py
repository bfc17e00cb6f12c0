"""benchmarks/rotary_embedding_bench.py's graphs: the export's nodes and the library's node compute the same
rotation (float64 maths of its own here), and the export's graph is what the rewrite replaces, so the bench times
like against like; run on the CPU EP with the library's CPU op."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from benchmarks import e2e_models  # noqa: E402
from benchmarks import rotary_embedding_bench as bench  # noqa: E402
from benchmarks import rotary_embedding_choice as choice  # noqa: E402

ITEMS, TOKENS, HEADS, D = 2, 5, 3, 8


def _expected(x, cos, sin):
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    rot = np.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)
    return x * cos + rot * sin


def _run(model, lib, x, cos, sin):
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(lib))
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x0": x, "x1": x, "cos": cos, "sin": sin})


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("fused", [False, True])
def test_each_graph_computes_the_rotation(ort_library, dtype, fused):
    model = bench.model(ITEMS, TOKENS, HEADS, D, dtype, 2, fused)
    onnx.checker.check_model(model)
    x = np.random.default_rng(2).standard_normal((ITEMS, TOKENS, HEADS, D)).astype(
        np.float16 if dtype == "fp16" else np.float32)
    cos, sin = bench.angles(TOKENS, D, np.random.default_rng(3))
    assert cos.shape == (1, TOKENS, 1, D) and np.array_equal(cos[..., 0::2], cos[..., 1::2])  # one angle per pair
    want = _expected(*(a.astype(np.float64) for a in (x, cos, sin)))
    for y in _run(model, ort_library, x, cos, sin):
        assert y.dtype == x.dtype
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-3, atol=2e-3)
    assert [n.op_type for n in model.graph.node].count("RotaryEmbedding") == (2 if fused else 0)


def test_the_exports_graph_is_what_the_rewrite_turns_into_the_librarys(ort_library, monkeypatch):
    from tritonforge.runtime.ortlib.rewrite import rewrite, rotary_embedding_measured

    monkeypatch.setitem(rotary_embedding_measured.SPEEDUP, "fp16", {"decomposed": 2.0})
    model = bench.model(ITEMS, TOKENS, HEADS, D, "fp16", 2, False)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"RotaryEmbedding": 2} and not report.left, report.lines()
    fused = bench.model(ITEMS, TOKENS, HEADS, D, "fp16", 2, True)
    assert [(n.op_type, list(n.input), list(n.output)) for n in model.graph.node] == \
        [(n.op_type, list(n.input), list(n.output)) for n in fused.graph.node]


def test_the_shapes_are_fluxs_queries_and_keys():
    assert e2e_models.rotary_streams("flux_dev") == [(1, 64 * 64 + 512, 24, 128)]  # 1024^2: 64^2 packed patches
    assert e2e_models.rotary_streams("sd3_medium") == []


def test_a_model_without_a_rotary_embedding_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(["--model", "sd3_medium"])
    assert err.value.code == 2 and "sd3_medium: no rotary embedding" in capsys.readouterr().err


def test_the_rewrites_table_is_what_the_rows_give():
    """The committed rows' table: fp16 and bf16 measured faster; fp32, with no rows, keeps the export's nodes."""
    from tritonforge.runtime.ortlib.rewrite import rotary_embedding_measured

    assert choice.TABLE.read_text() == choice.module_text(choice.speedups())
    assert rotary_embedding_measured.SPEEDUP == choice.speedups()
    assert set(choice.speedups()) == {"fp16", "bf16"} and all(
        by["decomposed"] >= 1 for by in choice.speedups().values())
