"""The models the end-to-end bench exports, as users export them: diffusers' classes built from the
published configs (random weights, no download), then torch.onnx (TorchScript and dynamo) and ORT's own
transformers optimizer. torch, diffusers and onnxruntime's optimizer are imported only here, and only
when an export runs.

Each config is the published config.json's values that change the graph (the rest are diffusers'
defaults, which the published files repeat); tests/benchmarks/test_e2e_models.py checks them against
runtime/zoo.py, whose shapes follow from the same files. The GroupNorms' weights and biases are drawn at
random (diffusers starts them at ones and zeros), so that a rewrite that dropped or misplaced them shows
in the outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

_VAE = {  # huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5: vae/config.json (SDXL's: the same)
    "in_channels": 3, "out_channels": 3, "latent_channels": 4, "layers_per_block": 2, "norm_num_groups": 32,
    "block_out_channels": [128, 256, 512, 512], "act_fn": "silu",
    "down_block_types": ["DownEncoderBlock2D"] * 4, "up_block_types": ["UpDecoderBlock2D"] * 4,
}
_SD15_UNET = {  # huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5: unet/config.json
    "sample_size": 64, "in_channels": 4, "out_channels": 4, "layers_per_block": 2, "norm_num_groups": 32,
    "norm_eps": 1e-5, "block_out_channels": [320, 640, 1280, 1280], "attention_head_dim": 8,
    "cross_attention_dim": 768, "act_fn": "silu", "flip_sin_to_cos": True, "freq_shift": 0,
    "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
}
_SDXL_UNET = {  # huggingface.co/stabilityai/stable-diffusion-xl-base-1.0: unet/config.json
    "sample_size": 128, "in_channels": 4, "out_channels": 4, "layers_per_block": 2, "norm_num_groups": 32,
    "norm_eps": 1e-5, "block_out_channels": [320, 640, 1280], "attention_head_dim": [5, 10, 20],
    "transformer_layers_per_block": [1, 2, 10], "cross_attention_dim": 2048, "use_linear_projection": True,
    "addition_embed_type": "text_time", "addition_time_embed_dim": 256,
    "projection_class_embeddings_input_dim": 2816, "act_fn": "silu", "flip_sin_to_cos": True, "freq_shift": 0,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
}
TEXT_TOKENS = 77  # text_encoder/config.json: max_position_embeddings


@dataclass(frozen=True)
class E2EModel:
    name: str
    kind: str  # vae_decoder or unet (ORT's optimizer's model type: vae or unet)
    config: dict
    side: int  # the image side in pixels
    batch: int  # a VAE decodes one image; a UNet step runs 2 (classifier-free guidance)
    text_embeds: int = 0  # SDXL's pooled text embedding width (added_cond_kwargs), 0 for none
    tiny: dict = field(default_factory=dict)  # overrides for a CPU smoke run of the same classes

    @property
    def ort_model_type(self) -> str:
        return "vae" if self.kind == "vae_decoder" else "unet"


_TINY_VAE = {"block_out_channels": [16, 16], "layers_per_block": 1, "norm_num_groups": 4,
             "down_block_types": ["DownEncoderBlock2D"] * 2, "up_block_types": ["UpDecoderBlock2D"] * 2}
_TINY_UNET = {"block_out_channels": [16, 32], "layers_per_block": 1, "norm_num_groups": 8, "attention_head_dim": 4,
              "cross_attention_dim": 16, "down_block_types": ["CrossAttnDownBlock2D", "DownBlock2D"],
              "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D"], "transformer_layers_per_block": 1,
              "projection_class_embeddings_input_dim": 16 + 6 * 8, "addition_time_embed_dim": 8}

MODELS = {m.name: m for m in (
    E2EModel("sd15_vae_decoder", "vae_decoder", _VAE, 512, 1, tiny=_TINY_VAE),
    E2EModel("sd15_unet", "unet", _SD15_UNET, 512, 2, tiny=_TINY_UNET),
    E2EModel("sdxl_vae_decoder", "vae_decoder", _VAE, 1024, 1, tiny=_TINY_VAE),
    E2EModel("sdxl_unet", "unet", _SDXL_UNET, 1024, 2, text_embeds=1280, tiny=_TINY_UNET),
)}
EXPORTERS = ("torchscript", "dynamo", "ort")


def models(spec: str) -> list[E2EModel]:
    names = list(MODELS) if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise KeyError(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)} or all")
    return [MODELS[n] for n in names]


def _build(m: E2EModel, dtype: str, device: str, tiny: bool, side: int | None = None):
    """(module, example inputs, input names) of the model, its GroupNorms' affine drawn at random; `side`:
    the image side in pixels (default: the model's)."""
    import torch
    from diffusers import AutoencoderKL, UNet2DConditionModel

    torch.manual_seed(0)
    config = {**m.config, **(m.tiny if tiny else {})}
    if tiny and m.kind == "unet" and not m.text_embeds:
        for k in ("projection_class_embeddings_input_dim", "addition_time_embed_dim"):
            config.pop(k, None)
    side = 32 if tiny else side or m.side
    cls = AutoencoderKL if m.kind == "vae_decoder" else UNet2DConditionModel
    net = cls(**config).eval()
    with torch.no_grad():
        for mod in net.modules():
            if isinstance(mod, torch.nn.GroupNorm) and mod.affine:
                mod.weight.copy_(1 + 0.2 * torch.randn_like(mod.weight))
                mod.bias.copy_(0.2 * torch.randn_like(mod.bias))
    t = torch.float16 if dtype == "fp16" else torch.float32
    net = net.to(device=device, dtype=t)
    lat = side // 8
    if m.kind == "vae_decoder":
        class Decoder(torch.nn.Module):
            def __init__(self, vae):
                super().__init__()
                self.vae = vae

            def forward(self, latent):
                return self.vae.decode(latent, return_dict=False)[0]

        return Decoder(net), (torch.randn(m.batch, 4, lat, lat, device=device, dtype=t),), ["latent"]
    cross = config["cross_attention_dim"]
    inputs = [torch.randn(m.batch, 4, lat, lat, device=device, dtype=t),
              torch.full((m.batch,), 999, device=device, dtype=torch.int64),
              torch.randn(m.batch, TEXT_TOKENS, cross, device=device, dtype=t)]
    names = ["sample", "timestep", "encoder_hidden_states"]
    if m.text_embeds:
        width = config["projection_class_embeddings_input_dim"] - 6 * config["addition_time_embed_dim"]
        inputs += [torch.randn(m.batch, width, device=device, dtype=t),
                   torch.randn(m.batch, 6, device=device, dtype=t)]
        names += ["text_embeds", "time_ids"]

    class Step(torch.nn.Module):
        def __init__(self, unet):
            super().__init__()
            self.unet = unet

        def forward(self, sample, timestep, hidden, *added):
            kw = {"added_cond_kwargs": {"text_embeds": added[0], "time_ids": added[1]}} if added else {}
            return self.unet(sample, timestep, hidden, return_dict=False, **kw)[0]

    return Step(net), tuple(inputs), names


def dynamic_axes(m: E2EModel) -> dict[str, dict[int, str]]:
    """The axes an Optimum-style export leaves symbolic, by input name: batch and the latent's height and
    width (a UNet's timestep and text embeddings follow the batch). One file then serves every resolution."""
    spatial = {0: "batch", 2: "height", 3: "width"}
    if m.kind == "vae_decoder":
        return {"latent": spatial}
    axes = {"sample": spatial, "timestep": {0: "batch"}, "encoder_hidden_states": {0: "batch"}}
    if m.text_embeds:
        axes.update(text_embeds={0: "batch"}, time_ids={0: "batch"})
    return axes


def export(m: E2EModel, exporter: str, dtype: str, work: Path, device: str = "cuda", tiny: bool = False,
           log=print, dynamic: bool = False, side: int | None = None) -> Path:
    """The model exported by `exporter` in `dtype`, in a directory of its own under `work` (made once;
    external data beside it when large). `ort` is ORT's transformers optimizer on the TorchScript fp32
    export (it refuses fp16 initializers), converted to fp16 after fusing as ORT's Stable Diffusion
    pipeline script does. `dynamic`: batch, height and width symbolic (`dynamic_axes` for TorchScript,
    `dynamic_shapes` for dynamo), as Optimum and most pipelines export; `side`: the image side the example
    inputs have (the export's own with static axes; default the model's)."""
    at = f"@{side}" if side and side != m.side and not tiny else ""
    stem = f"{m.name}{'_tiny' if tiny else ''}{at}.{exporter}{'.dynamic' if dynamic else ''}.{dtype}"
    path = work / stem / f"{stem}.onnx"  # a directory each: TorchScript names external files by tensor
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if exporter == "ort":
        return _ort_optimized(m, dtype, export(m, "torchscript", "fp32", work, device, tiny, log, dynamic, side), path)
    import torch

    module, inputs, names = _build(m, dtype, device, tiny, side)
    axes = dynamic_axes(m) if dynamic else {}
    log(f"  exporting {m.name} {dtype} with torch.onnx ({exporter}{', dynamic axes' if dynamic else ''}) ...")
    with torch.no_grad():
        if exporter == "torchscript":
            torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=17, input_names=names,
                              output_names=["out"], dynamic_axes=axes or None)
        elif exporter == "dynamo":
            shapes = None
            if axes:
                dims = {}  # one Dim per name: the batch is shared by every input that has it
                shapes = tuple({i: dims.setdefault(d, torch.export.Dim.AUTO) for i, d in axes.get(n, {}).items()}
                               or None for n in names)
            torch.onnx.export(module, inputs, str(path), dynamo=True, input_names=names, output_names=["out"],
                              external_data=True, dynamic_shapes=shapes)
        else:
            raise ValueError(f"unknown exporter '{exporter}' (one of {', '.join(EXPORTERS)})")
    del module
    if device == "cuda":
        torch.cuda.empty_cache()
    return path


def _ort_optimized(m: E2EModel, dtype: str, fp32_export: Path, path: Path) -> Path:
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions(m.ort_model_type)
    if m.kind == "unet":  # as onnxruntime/transformers/models/stable_diffusion/optimize_pipeline.py sets them
        options.enable_packed_kv = options.enable_packed_qkv = dtype == "fp16"
        options.enable_bias_add = True
    opt = optimize_model(str(fp32_export), model_type=m.ort_model_type, num_heads=0, hidden_size=0, opt_level=0,
                         optimization_options=options, use_gpu=True)
    if dtype == "fp16":
        _resize_scales_as_initializers(opt.model)
        opt.convert_float_to_float16(keep_io_types=False, op_block_list=[])
    weights = sum(len(t.raw_data) for t in opt.model.graph.initializer)
    opt.save_model_to_file(str(path), use_external_data_format=weights > 1 << 30)
    return path


def _resize_scales_as_initializers(model) -> None:
    """Constant nodes feeding a Resize's scales become initializers: ORT's fp16 converter keeps a Resize's
    scales float when they are initializers (ALWAYS_FLOAT_INPUTS) but converts a Constant's output, which
    leaves a model ORT refuses to load."""
    from onnx import numpy_helper

    scales = {n.input[2] for n in model.graph.node if n.op_type == "Resize" and len(n.input) > 2}
    for n in list(model.graph.node):
        if n.op_type == "Constant" and n.output[0] in scales and n.attribute and n.attribute[0].name == "value":
            model.graph.initializer.append(numpy_helper.from_array(numpy_helper.to_array(n.attribute[0].t),
                                                                   n.output[0]))
            model.graph.node.remove(n)
