"""T5's encoder (SD3's and Flux's third text encoder) as torch.onnx exports it: its RMSNorms (T5LayerNorm, written
out as Pow, ReduceMean, Add, Sqrt, Div and Mul between Casts) are left to onnxruntime, which fuses each into its own
SimplifiedLayerNormalization when it makes the session; the rewrite must keep every one of them fusable. Its
attention (scores plus the relative position bias, a softmax in float between Casts) becomes ORT's
MultiHeadAttention with that bias as its attention_bias, unscaled as T5 is."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
ort = pytest.importorskip("onnxruntime", reason="the fusion is onnxruntime's")
torch = pytest.importorskip("torch", reason="the encoder is exported by torch.onnx (pins/bench.txt)")
transformers = pytest.importorskip("transformers", reason="T5's encoder is transformers' (pins/optimum.txt)")

from tritonforge.runtime.ortlib.rewrite import rewrite_file  # noqa: E402

LAYERS = 2


def _optimized(path, library, tmp_path) -> tuple[Counter, np.ndarray]:
    """(ops of the session's graph after onnxruntime's fusions, the output for fixed token ids). On the CPU EP a
    float16 norm is fused once the level that lifts CPU float16 into float32 has run: its default, ENABLE_ALL."""
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(library))
    so.optimized_model_filepath = str(tmp_path / f"{path.stem}.optimized.onnx")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # onnxruntime's default
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, {"ids": np.arange(12, dtype=np.int64)[None] % 100})
    return Counter(n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node), out


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_the_rewritten_t5_encoders_rms_norms_are_still_fused_by_onnxruntime(ort_library, tmp_path, dtype):
    cfg = transformers.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=LAYERS, num_heads=4)
    model = transformers.T5EncoderModel(cfg).eval()
    model = model.half() if dtype == "fp16" else model
    src, dst = tmp_path / "t5.onnx", tmp_path / "t5.tf.onnx"
    with torch.no_grad():
        torch.onnx.export(model, (torch.zeros(1, 12, dtype=torch.int64),), str(src), input_names=["ids"],
                          output_names=["hidden"], opset_version=17, dynamo=False)
    rewrite_file(src, dst, ort_library, use_library=False)  # the CPU here: every dtype, as a GPU's library takes
    before, want = _optimized(src, ort_library, tmp_path)
    after, got = _optimized(dst, ort_library, tmp_path)
    norms = 2 * LAYERS + 1  # before attention and before the feed-forward in each block, and the final one
    assert before["SimplifiedLayerNormalization"] == after["SimplifiedLayerNormalization"] == norms, (before, after)
    assert not after["Pow"] and not after["ReduceMean"]
    assert before["Softmax"] == LAYERS and not after["Softmax"] and after["MultiHeadAttention"] == LAYERS
    attention = [n for n in onnx.load(dst).graph.node if n.op_type == "MultiHeadAttention"]
    assert len(attention) == LAYERS and {n.domain for n in attention} == {"com.microsoft"}
    # every layer adds the one bias the first layer computes (positions and the padding mask)
    assert len({n.input[5] for n in attention}) == 1
    assert all(a.f == 1.0 for n in attention for a in n.attribute if a.name == "scale")
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), atol=2e-2 if dtype == "fp16" else 1e-5)
