"""Diffusion models beyond the zoo the tables were measured on, tiny, as torch.onnx's TorchScript exporter writes
them, with a fixed and with a symbolic batch: each rewritten model loads and computes what the export computes on
the CPU EP, and every attention's softmax is fused. Forms these brought out: CogView4's head split computes its
Slice bounds as `dim % rank` on constants (the probe folds them, or no shape past them is known); with a symbolic
batch, its `unflatten(-1, (heads, -1))` leaves the head width to a -1 and AuraFlow's and HunyuanDiT's
`view(batch, -1, heads, head_dim)` compute head_dim with a Div, neither of which inference works out (the probe
does); Sana's block takes its batch from the shape of the residual sum its norm would fuse (that fusion would read
its own result, so the norm goes alone)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the rewrite edits ONNX models")
ort = pytest.importorskip("onnxruntime", reason="the export and the rewrite run in onnxruntime")
torch = pytest.importorskip("torch", reason="the models are exported by torch.onnx (pins/bench.txt)")
diffusers = pytest.importorskip("diffusers", reason="the models are diffusers' (pins/bench.txt)")

from tritonforge.runtime.ortlib.rewrite import rewrite_file  # noqa: E402


def _cogview4():
    net = diffusers.CogView4Transformer2DModel(
        patch_size=2, in_channels=4, out_channels=4, num_layers=2, attention_head_dim=16, num_attention_heads=2,
        text_embed_dim=24, time_embed_dim=16, condition_dim=8, pos_embed_max_size=16, sample_size=8,
        rope_axes_dim=(8, 8))
    sizes = torch.tensor([[64.0, 64.0]] * 2)
    return net, (torch.randn(2, 4, 8, 8), torch.randn(2, 5, 24), torch.tensor([500.0, 500.0]), sizes, sizes,
                 torch.zeros(2, 2))


def _sana():
    net = diffusers.SanaTransformer2DModel(
        in_channels=8, out_channels=8, num_attention_heads=2, attention_head_dim=16, num_layers=2,
        num_cross_attention_heads=2, cross_attention_head_dim=16, cross_attention_dim=32, caption_channels=24,
        sample_size=8)
    return net, (torch.randn(2, 8, 8, 8), torch.randn(2, 5, 24), torch.tensor([500, 500]))


def _dit():
    net = diffusers.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, num_layers=2,
                                          sample_size=8, patch_size=2, norm_num_groups=8)
    return net, (torch.randn(2, 4, 8, 8), torch.tensor([500, 500]), torch.tensor([1, 2]))


def _auraflow():
    net = diffusers.AuraFlowTransformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, num_mmdit_layers=1, num_single_dit_layers=1,
        attention_head_dim=16, num_attention_heads=2, joint_attention_dim=24, caption_projection_dim=32,
        out_channels=4, pos_embed_max_size=64)
    return net, (torch.randn(2, 4, 8, 8), torch.randn(2, 5, 24), torch.tensor([500.0, 500.0]))


def _ddpm():
    net = diffusers.UNet2DModel(
        sample_size=16, in_channels=3, out_channels=3, block_out_channels=(32, 64), layers_per_block=1,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=16, attention_head_dim=8)
    return net, (torch.randn(2, 3, 16, 16), torch.tensor([10, 10]))


def _hunyuan():
    net = diffusers.HunyuanDiT2DModel(
        num_attention_heads=2, attention_head_dim=16, in_channels=4, patch_size=2, sample_size=8, hidden_size=32,
        num_layers=2, cross_attention_dim=24, cross_attention_dim_t5=40, pooled_projection_dim=40, text_len=5,
        text_len_t5=6)
    meta = torch.tensor([[64.0, 64.0, 64.0, 64.0, 0.0, 0.0]] * 2)
    return net, (torch.randn(2, 4, 8, 8), torch.tensor([500.0, 500.0]), torch.randn(2, 5, 24), torch.ones(2, 5),
                 torch.randn(2, 6, 40), torch.ones(2, 6), meta, torch.zeros(2, dtype=torch.int64))


MODELS = {"cogview4": _cogview4, "sana": _sana, "dit": _dit, "auraflow": _auraflow, "ddpm": _ddpm,
          "hunyuan": _hunyuan}
# in the default run: the forms the rewrite first missed; the rest with the full run
DEFAULT = {("cogview4", False), ("sana", False), ("auraflow", True)}


class _Positional(torch.nn.Module):  # the model's positional inputs, its first output
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, *inputs):
        return self.net(*inputs, return_dict=False)[0]


@pytest.mark.parametrize(("name", "dynamic"), [
    pytest.param(n, d, marks=() if (n, d) in DEFAULT else pytest.mark.full, id=f"{n}-{'dynamic' if d else 'static'}")
    for n in MODELS for d in (False, True)])
def test_a_model_the_tables_never_saw_is_rewritten_to_what_its_export_computes(name, dynamic, ort_library,
                                                                              tmp_path):
    torch.manual_seed(0)
    net, inputs = MODELS[name]()
    module = _Positional(net.eval())
    src, dst = tmp_path / f"{name}.onnx", tmp_path / f"{name}.tf.onnx"
    names = [f"input_{i}" for i in range(len(inputs))]
    with torch.no_grad():
        # dynamic: the batch symbolic, so the head split's target is computed from shapes at run time
        axes = {k: {0: "batch"} for k, v in zip(names, inputs) if dynamic and v.ndim and v.shape[0] == 2}
        torch.onnx.export(module, inputs, str(src), input_names=names, output_names=["out"], opset_version=17,
                          dynamo=False, dynamic_axes=axes or None)
    report = rewrite_file(src, dst, ort_library, gpu="NVIDIA H100 80GB HBM3")
    before = Counter(n.op_type for n in onnx.load(src).graph.node)
    after = Counter(n.op_type for n in onnx.load(dst).graph.node)
    assert before["Softmax"] > 0 and not after["Softmax"], report.left
    assert after["MultiHeadAttention"] == before["Softmax"]
    feeds = {k: v.numpy() for k, v in zip(names, inputs)}
    want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(ort_library))
    got = ort.InferenceSession(str(dst), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    if name == "sana":  # the norm whose fusion would read its own result went alone, and the report says why
        assert any("would read a value computed from its own result" in why for why in report.left), report.left


def test_a_unet_with_a_symbolic_batch_fuses_the_norms_after_self_attention_as_with_a_fixed_one(ort_library, tmp_path):
    """An SD 1.5-style UNet in float16 with only its batch symbolic: the tokens after a self-attention's
    `view(batch, -1, heads, head_dim)` are worked out (the batch is the tokens' own), so its output Linear is
    known to have the residual's shape and the Linear bias, residual and LayerNormalization after it are fused as
    with a fixed batch. After cross-attention TorchScript takes the batch from the text's shape, whose symbol
    inference does not know to be the image's: those norms are left, and the outputs still agree."""
    torch.manual_seed(0)
    net = diffusers.UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=16).eval().half()
    inputs = (torch.randn(2, 4, 8, 8).half(), torch.tensor([10.0, 10.0]).half(), torch.randn(2, 7, 32).half())
    names = ["sample", "timestep", "encoder_hidden_states"]
    reports, outs = [], []
    for axes in (None, {k: {0: "batch"} for k in names}):
        src, dst = tmp_path / f"unet{bool(axes)}.onnx", tmp_path / f"unet{bool(axes)}.tf.onnx"
        with torch.no_grad():
            torch.onnx.export(_Positional(net), inputs, str(src), input_names=names, output_names=["out"],
                              opset_version=17, dynamo=False, dynamic_axes=axes)
        reports.append(rewrite_file(src, dst, ort_library, gpu="NVIDIA H100 80GB HBM3"))
        so = ort.SessionOptions()
        so.register_custom_ops_library(str(ort_library))
        feeds = {k: v.numpy() for k, v in zip(names, inputs)}
        outs.append(ort.InferenceSession(str(dst), so, providers=["CPUExecutionProvider"]).run(None, feeds)[0])
    fixed, symbolic = (r.rewritten["SkipLayerNormalization"] for r in reports)
    assert fixed == 8  # norm2 and norm3 of each of the four transformer blocks
    assert symbolic == 4
    left = [why for why in reports[1].left if "SkipLayerNormalization" not in why and "norm3" in why]
    assert len(left) == 4 and all("residual" in why for why in left), reports[1].left
    np.testing.assert_allclose(outs[1].astype(np.float64), outs[0].astype(np.float64), atol=2e-2)
