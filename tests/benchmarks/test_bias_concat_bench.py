"""benchmarks/bias_concat_bench.py's graphs: the export's Linears and Concat and the MatMuls with the library's
BiasConcat compute the same join (float64 maths of its own here), so the bench times like against like; run on the
CPU EP with the library's CPU op."""

from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from benchmarks import bias_concat_bench as bench  # noqa: E402

ITEMS, IMAGE, TEXT, C = 2, 6, 3, 16


@pytest.mark.parametrize("fused", [False, True])
def test_each_graph_computes_the_join(ort_library, fused):
    model = bench.model(ITEMS, IMAGE, TEXT, C, "fp32", 2, fused)
    onnx.checker.check_model(model)
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((ITEMS, IMAGE, C)).astype(np.float32), rng.standard_normal((ITEMS, TEXT, C)).astype(
        np.float32)
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(ort_library))
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    (wa, ba), (wb, bb) = ((w.astype(np.float64), v.astype(np.float64)) for w, v in bench.linears(C))
    want = np.concatenate([a @ wa + ba, b @ wb + bb], axis=1)
    for y in sess.run(None, {"x0": a, "t0": b, "x1": a, "t1": b}):
        np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMul") == 4 and ops.count("BiasConcat") == (2 if fused else 0)


def test_the_shapes_are_the_joint_attentions():
    assert bench.joint_streams("sd3_medium") == [(2, 4096, 333, 1536)]  # 1024^2, CLIP + T5 tokens, batch 2 (CFG)
    assert bench.joint_streams("flux_dev") == [(1, 4096, 512, 3072)]
    assert bench.joint_streams("pixart_sigma") == []


def test_a_model_without_a_joint_attention_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(["--model", "pixart_sigma"])
    assert err.value.code == 2 and "pixart_sigma: no joint attention" in capsys.readouterr().err


def test_the_rewrites_table_is_what_the_rows_give():
    """From the rows: a dtype without them keeps the Concat and the bias Adds."""
    from tritonforge.runtime.ortlib.rewrite import choices

    assert set(choices.table("bias_concat").speedup) == {"fp16", "bf16"}
