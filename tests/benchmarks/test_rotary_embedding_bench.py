"""benchmarks/rotary_embedding_bench.py's graphs: the export's nodes and the library's node compute the same
rotation (float64 maths of its own here), and the export's graph is what the rewrite replaces, so the bench times
like against like; run on the CPU EP with the library's CPU op."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from benchmarks import choices as choice_file  # noqa: E402
from benchmarks import e2e_models  # noqa: E402
from benchmarks import rotary_embedding_bench as bench  # noqa: E402
from tests.runtime.ortlib.rewrite.measured import measured_as  # noqa: E402

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
    from tritonforge.runtime.ortlib.rewrite import rewrite

    measured_as(monkeypatch, "rotary_embedding", "fp16", {"decomposed": 2.0})
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
    from tritonforge.runtime.ortlib.rewrite import choices

    table = choices.table("rotary_embedding").speedup
    assert set(table) == {"fp16", "bf16"} and all(by["decomposed"] >= 1 for by in table.values())


@pytest.mark.parametrize("form", ["rms", "rms_joined"])
def test_the_norm_forms_graphs_compute_the_norm_then_the_rotation(ort_library, form):
    """rms: x normalized with gamma, then turned; rms_joined: 2 text tokens with gamma joined to 3 image tokens with
    gamma_b, then turned. The export's graph (ORT's RMSNormalization, opset 23) and the library's node agree with
    float64."""
    from tritonforge.runtime.ops.rotary_embedding import rms_norm_ref

    text = 2 if form == "rms_joined" else 0
    x = np.random.default_rng(4).standard_normal((ITEMS, TOKENS, HEADS, D)).astype(np.float16)
    cos, sin = bench.angles(TOKENS, D, np.random.default_rng(5))
    g = [bench.gamma(D, seed).astype(np.float64) for seed in (1, 2)]
    x64 = x.astype(np.float64)
    norm = lambda a, gamma: rms_norm_ref(a, gamma, bench.EPS)  # noqa: E731
    normed = np.concatenate([norm(x64[:, :text], g[0]), norm(x64[:, text:], g[1])], axis=1) if text else norm(x64, g[0])
    want = _expected(normed, cos.astype(np.float64), sin.astype(np.float64))
    feeds = {"cos": cos, "sin": sin, **({"x0": x[:, :text], "xb0": x[:, text:]} if text else {"x0": x})}
    for fused in (False, True):
        model = bench.model(ITEMS, TOKENS, HEADS, D, "fp16", 1, fused, form, text)
        onnx.checker.check_model(model)
        so = ort.SessionOptions()
        so.register_custom_ops_library(str(ort_library))
        (y,) = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)
        assert y.dtype == np.float16 and y.shape == x.shape
        np.testing.assert_allclose(y.astype(np.float64), want, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("form", ["rms", "rms_joined"])
def test_the_norm_forms_export_graph_is_what_the_rewrite_turns_into_the_librarys(ort_library, monkeypatch, form):
    from onnx import numpy_helper
    from tritonforge.runtime.ortlib.rewrite import rewrite

    measured_as(monkeypatch, "rotary_embedding", "fp16", {"decomposed": 2.0, form: 2.0})
    text = 2 if form == "rms_joined" else 0
    model = bench.model(ITEMS, TOKENS, HEADS, D, "fp16", 2, False, form, text)
    report = rewrite(model, ort_library)
    assert report.rewritten == {"RotaryEmbedding": 2} and not report.left, report.lines()
    fused = bench.model(ITEMS, TOKENS, HEADS, D, "fp16", 2, True, form, text)
    values = lambda m: {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}  # noqa: E731
    got, want = values(model), values(fused)
    for ours, theirs in zip(model.graph.node, fused.graph.node, strict=True):
        assert (ours.op_type, ours.input[:3], ours.output) == (theirs.op_type, theirs.input[:3], theirs.output)
        assert ours.input[4:5] == theirs.input[4:5]  # X_b
        assert all(np.array_equal(got[a], want[b]) and got[a].dtype == np.float32
                   for a, b in zip(ours.input[3::2], theirs.input[3::2], strict=True))  # the gammas, fp32
        assert {a.name: onnx.helper.get_attribute_value(a) for a in ours.attribute} == \
            {a.name: onnx.helper.get_attribute_value(a) for a in theirs.attribute}


def test_the_forms_shapes_and_labels():
    shapes = bench.shapes(bench.FORMS)("flux_dev")
    assert [bench.label("flux_dev", s) for s in shapes] == [
        "flux_dev 1x4608x24x128", "rms flux_dev 1x4608x24x128", "rms_joined flux_dev 1x512+4096x24x128"]
    assert bench.main(["--forms", "rms,twirl", "--model", "flux_dev"]) == 2


def test_each_forms_speedup_comes_from_its_own_rows(tmp_path):
    from benchmarks.results import write_rows

    path = tmp_path / "results.csv"
    for shape, export, ours in (("flux_dev 1x8x2x4", 30.0, 10.0), ("rms flux_dev 1x8x2x4", 40.0, 20.0),
                                ("rms_joined flux_dev 1x3+5x2x4", 50.0, 60.0)):
        write_rows("rotary_embedding", "GPU X", [
            {"provider": p, "shape": shape, "dtype": "fp16", "metric": "us", "unit": "us", "value": str(v), "extra": ""}
            for p, v in (("decomposed", export), ("tritonforge", ours), ("torch", 1.0))], path)
    assert choice_file.build(path)["tables"]["rotary_embedding"]["GPU X"]["SPEEDUP"] == {
        "fp16": {"decomposed": 3.0, "rms": 2.0, "rms_joined": 0.833}}
