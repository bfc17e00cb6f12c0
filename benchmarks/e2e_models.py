"""The models the end-to-end bench exports, as users export them: diffusers' classes built from the
published configs (random weights, no download), then torch.onnx (TorchScript at opset 17, dynamo at its
default opset 18 and at 23, where it writes ONNX Attention) and ORT's own transformers optimizer. torch,
diffusers and onnxruntime's optimizer are imported only here, and only when an export runs.

Each config is the published config.json's values that change the graph (the rest are diffusers'
defaults, which the published files repeat); tests/benchmarks/test_e2e_models.py checks them against
runtime/zoo.py, whose shapes follow from the same files. The GroupNorms' weights and biases are drawn at
random (diffusers starts them at ones and zeros), so that a rewrite that dropped or misplaced them shows
in the outputs.
"""

from __future__ import annotations

import itertools
import shutil
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
# Diffusion transformers (their transformer/config.json). SD3: CLIP's 77 tokens then T5's 256; Flux: T5's 512;
# PixArt-Sigma: T5's 300.
_SD3_MEDIUM = {  # huggingface.co/stabilityai/stable-diffusion-3-medium-diffusers
    "sample_size": 128, "patch_size": 2, "in_channels": 16, "num_layers": 24, "attention_head_dim": 64,
    "num_attention_heads": 24, "joint_attention_dim": 4096, "caption_projection_dim": 1536,
    "pooled_projection_dim": 2048, "out_channels": 16, "pos_embed_max_size": 192,
}
_SD35_MEDIUM = {  # huggingface.co/stabilityai/stable-diffusion-3.5-medium: RMSNorm on q and k, dual attention
    **_SD3_MEDIUM, "pos_embed_max_size": 384, "qk_norm": "rms_norm", "dual_attention_layers": list(range(13)),
}
_FLUX_DEV = {  # huggingface.co/black-forest-labs/FLUX.1-dev
    "patch_size": 1, "in_channels": 64, "num_layers": 19, "num_single_layers": 38, "attention_head_dim": 128,
    "num_attention_heads": 24, "joint_attention_dim": 4096, "pooled_projection_dim": 768, "guidance_embeds": True,
    "axes_dims_rope": [16, 56, 56],
}
_PIXART_SIGMA = {  # huggingface.co/PixArt-alpha/PixArt-Sigma-XL-2-1024-MS
    "sample_size": 128, "patch_size": 2, "in_channels": 4, "out_channels": 8, "num_layers": 28,
    "attention_head_dim": 72, "num_attention_heads": 16, "cross_attention_dim": 1152, "caption_channels": 4096,
    "activation_fn": "gelu-approximate", "attention_bias": True, "norm_type": "ada_norm_single",
    "norm_elementwise_affine": False, "norm_eps": 1e-6, "num_embeds_ada_norm": 1000, "use_additional_conditions": False,
}
DIT_TEXT = {"sd3": 77 + 256, "flux": 512, "pixart": 300}
# The depth a config sets, by key: a bench run may reduce it (E2EModel.layers) where the export or the GPU demands
DEPTH_KEYS = ("num_layers", "num_single_layers")


@dataclass(frozen=True)
class E2EModel:
    name: str
    kind: str  # vae_decoder, unet, sd3, flux or pixart
    config: dict
    side: int  # the image side in pixels
    batch: int  # a VAE decodes one image; a UNet step runs 2 (classifier-free guidance)
    text_embeds: int = 0  # SDXL's pooled text embedding width (added_cond_kwargs), 0 for none
    tiny: dict = field(default_factory=dict)  # overrides for a CPU smoke run of the same classes

    @property
    def ort_model_type(self) -> str | None:
        """ORT's transformers optimizer's model type for it (None: the optimizer has none)."""
        return {"vae_decoder": "vae", "unet": "unet", "sd3": "mmdit", "flux": "mmdit"}.get(self.kind)

    @property
    def transformer(self) -> bool:
        return self.kind in DIT_TEXT

    def depth(self, layers: tuple | None = None) -> str:
        """The blocks a run builds, "<n>/<of>" per depth key (e.g. Flux's "4/19+8/38"), or "" for the whole
        model."""
        if not layers:
            return ""
        have = [self.config[k] for k in DEPTH_KEYS if k in self.config]
        return "+".join(f"{n}/{of}" for n, of in zip(layers, have))


_TINY_SD3 = {"sample_size": 8, "in_channels": 4, "num_layers": 2, "attention_head_dim": 8, "num_attention_heads": 2,
             "joint_attention_dim": 16, "caption_projection_dim": 16, "pooled_projection_dim": 8, "out_channels": 4,
             "pos_embed_max_size": 8}
_TINY_SD35 = {**_TINY_SD3, "dual_attention_layers": [0]}
_TINY_FLUX = {"in_channels": 8, "num_layers": 1, "num_single_layers": 2, "attention_head_dim": 16,
              "num_attention_heads": 2, "joint_attention_dim": 16, "pooled_projection_dim": 8,
              "axes_dims_rope": [4, 6, 6]}
_TINY_PIXART = {"sample_size": 8, "num_layers": 2, "attention_head_dim": 8, "num_attention_heads": 2,
                "cross_attention_dim": 16, "caption_channels": 12, "norm_num_groups": 4}
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
    E2EModel("sd3_medium", "sd3", _SD3_MEDIUM, 1024, 2, tiny=_TINY_SD3),
    E2EModel("sd35_medium", "sd3", _SD35_MEDIUM, 1024, 2, tiny=_TINY_SD35),
    E2EModel("flux_dev", "flux", _FLUX_DEV, 1024, 1, tiny=_TINY_FLUX),
    E2EModel("pixart_sigma", "pixart", _PIXART_SIGMA, 1024, 2, tiny=_TINY_PIXART),
)}
EXPORTERS = ("torchscript", "dynamo", "dynamo23", "ort")
DTYPES = {"fp16": "float16", "fp32": "float32", "bf16": "bfloat16"}  # torch's names


def dit_streams(name: str) -> list[tuple[int, int, int]]:
    """(items, tokens per item, hidden width) of each token stream a diffusion transformer's blocks norm and run
    an MLP on, at the model's side: the image's tokens ((side / 8 / patch)^2; Flux packs 2x2 latent patches into
    its 64 channels), the text's where its blocks have a stream of their own (SD3's context, Flux's double
    blocks), and Flux's single blocks over both."""
    m = MODELS[name]
    c = m.config
    hidden = c["num_attention_heads"] * c["attention_head_dim"]
    patch = 2 if m.kind == "flux" else c.get("patch_size", 1)
    image, text = (m.side // 8 // patch) ** 2, DIT_TEXT[m.kind]
    streams = [(m.batch, image, hidden)]
    if m.kind in ("sd3", "flux"):
        streams.append((m.batch, text, hidden))
    if m.kind == "flux":
        streams.append((m.batch, image + text, hidden))
    return streams


def rotary_streams(name: str) -> list[tuple[int, int, int, int]]:
    """(items, tokens, heads, head_dim) of the queries and keys a diffusion transformer turns by position (rotary
    embedding): Flux's, over the image's and text's tokens together, in its double and single blocks alike; none
    for the models without one."""
    m = MODELS[name]
    if m.kind != "flux":
        return []
    c = m.config
    items, image, _ = dit_streams(name)[0]
    return [(items, image + DIT_TEXT["flux"], c["num_attention_heads"], c["attention_head_dim"])]


def unet_streams(name: str) -> list[tuple[int, int, int]]:
    """(items, tokens per item, channels) of each distinct resolution a UNet's transformer blocks run at, at the
    model's side: each cross-attention down block's level (latent side / 2^level, its block_out_channels) and the
    mid block's at the lowest level; the up blocks mirror them."""
    m = MODELS[name]
    c = m.config
    latent, chans = m.side // 8, c["block_out_channels"]
    streams = [(m.batch, (latent >> level) ** 2, ch)
               for level, (kind, ch) in enumerate(zip(c["down_block_types"], chans)) if kind.startswith("CrossAttn")]
    streams.append((m.batch, (latent >> (len(chans) - 1)) ** 2, chans[-1]))
    return list(dict.fromkeys(streams))


def models(spec: str) -> list[E2EModel]:
    names = list(MODELS) if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise KeyError(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)} or all")
    return [MODELS[n] for n in names]


def save_weights(module, path: Path) -> Path:
    """Every parameter and buffer of `module` (non-persistent buffers too, tied ones under each name) to `path`,
    as a user's weights file holds them: what build(..., weights=path) loads in another process."""
    import torch

    tensors = itertools.chain(module.named_parameters(remove_duplicate=False),
                              module.named_buffers(remove_duplicate=False))
    torch.save({name: t.detach().cpu() for name, t in tensors}, path)
    return path


def _load_weights(module, path: Path, device: str):
    """save_weights' file into `module`, built on the meta device: each tensor put in place on `device`, in the
    dtype it was saved in (no random initialization: what loading a checkpoint costs, not what building one does)."""
    import torch

    for name, t in torch.load(path, map_location="cpu", mmap=True).items():
        owner, _, leaf = name.rpartition(".")
        mod = module.get_submodule(owner)
        value = t.to(device)
        if leaf in mod._parameters:
            mod._parameters[leaf] = torch.nn.Parameter(value, requires_grad=False)
        else:
            mod._buffers[leaf] = value
    left = [n for n, t in itertools.chain(module.named_parameters(), module.named_buffers()) if t.is_meta]
    if left:
        raise ValueError(f"{path}: holds no {', '.join(left[:3])}: not this model's weights")
    return module


def build(m: E2EModel, dtype: str, device: str, tiny: bool, side: int | None = None, layers: tuple | None = None,
          weights: Path | None = None):
    """(module, example inputs, input names) of the model, its GroupNorms' affine drawn at random; `side`:
    the image side in pixels (default: the model's); `layers`: the depth to build instead of the config's
    (DEPTH_KEYS, in order); `weights`: save_weights' file of the same model to load instead of drawing them."""
    import contextlib

    import torch

    torch.manual_seed(0)
    config = {**m.config, **(m.tiny if tiny else {})}
    for key, n in zip([k for k in DEPTH_KEYS if k in config], layers or ()):
        config[key] = n
    t = getattr(torch, DTYPES[dtype])
    empty = torch.device("meta") if weights else contextlib.nullcontext()  # the weights come from the file
    if m.transformer:
        built = _build_dit(m, config, t, device, tiny, side, empty)
        return (_load_weights(built[0], weights, device).eval(), *built[1:]) if weights else built
    from diffusers import AutoencoderKL, UNet2DConditionModel

    if tiny and m.kind == "unet" and not m.text_embeds:
        for k in ("projection_class_embeddings_input_dim", "addition_time_embed_dim"):
            config.pop(k, None)
    side = 32 if tiny else side or m.side
    cls = AutoencoderKL if m.kind == "vae_decoder" else UNet2DConditionModel
    with empty:
        net = cls(**config).eval()
    if not weights:
        with torch.no_grad():
            for mod in net.modules():
                if isinstance(mod, torch.nn.GroupNorm) and mod.affine:
                    mod.weight.copy_(1 + 0.2 * torch.randn_like(mod.weight))
                    mod.bias.copy_(0.2 * torch.randn_like(mod.bias))
        net = net.to(device=device, dtype=t)
    built = _build_unet_or_vae(m, net, config, t, device, side)
    return (_load_weights(built[0], weights, device).eval(), *built[1:]) if weights else built


def _build_unet_or_vae(m: E2EModel, net, config: dict, t, device: str, side: int):
    import torch

    lat = side // 8
    if m.kind == "vae_decoder":
        class Decoder(torch.nn.Module):
            def __init__(self, vae):
                super().__init__()
                self.vae = vae

            def forward(self, latent):
                return self.vae.decode(latent, return_dict=False)[0]

        latent = config.get("latent_channels", 4)  # SD3's and Flux's VAEs: 16
        return Decoder(net), (torch.randn(m.batch, latent, lat, lat, device=device, dtype=t),), ["latent"]
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


def _build_dit(m: E2EModel, config: dict, t, device: str, tiny: bool, side: int | None, empty):
    """A diffusion transformer's step: SD3's and PixArt's latent (B, C, h, w), Flux's packed 2x2 patches of it
    (B, h/2 * w/2, 4C) with their positions (img_ids: 0, row, column) and the text's (txt_ids: zeros). Built in
    the context `empty` (the meta device, when the weights are loaded after)."""
    import torch
    from diffusers import FluxTransformer2DModel, PixArtTransformer2DModel, SD3Transformer2DModel

    cls = {"sd3": SD3Transformer2DModel, "flux": FluxTransformer2DModel, "pixart": PixArtTransformer2DModel}[m.kind]
    with empty:
        net = cls(**config).eval()
    if not isinstance(empty, torch.device):
        net = net.to(device=device, dtype=t)
    lat = 8 if tiny else (side or m.side) // 8
    text, b = 5 if tiny else DIT_TEXT[m.kind], m.batch
    rand = lambda *shape: torch.randn(*shape, device=device, dtype=t)  # noqa: E731

    class Step(torch.nn.Module):  # one named input each, as the exporters name the graph's inputs
        def __init__(self):
            super().__init__()
            self.net = net

    if m.kind == "sd3":
        class SD3Step(Step):
            def forward(self, hidden_states, encoder_hidden_states, pooled_projections, timestep):
                return self.net(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                                pooled_projections=pooled_projections, timestep=timestep, return_dict=False)[0]

        inputs = [rand(b, config["in_channels"], lat, lat), rand(b, text, config["joint_attention_dim"]),
                  rand(b, config["pooled_projection_dim"]), torch.full((b,), 999.0, device=device, dtype=t)]
        return SD3Step(), tuple(inputs), ["hidden_states", "encoder_hidden_states", "pooled_projections", "timestep"]
    if m.kind == "flux":
        class FluxStep(Step):
            def forward(self, hidden_states, encoder_hidden_states, pooled_projections, timestep, img_ids, txt_ids,
                        guidance=None):
                return self.net(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states,
                                pooled_projections=pooled_projections, timestep=timestep, img_ids=img_ids,
                                txt_ids=txt_ids, guidance=guidance, return_dict=False)[0]

        grid = lat // 2
        ids = torch.zeros(grid * grid, 3, device=device, dtype=t)
        ids[:, 1] = torch.arange(grid * grid, device=device) // grid
        ids[:, 2] = torch.arange(grid * grid, device=device) % grid
        inputs = [rand(b, grid * grid, config["in_channels"]), rand(b, text, config["joint_attention_dim"]),
                  rand(b, config["pooled_projection_dim"]), torch.full((b,), 0.999, device=device, dtype=t), ids,
                  torch.zeros(text, 3, device=device, dtype=t)]
        names = ["hidden_states", "encoder_hidden_states", "pooled_projections", "timestep", "img_ids", "txt_ids"]
        if config.get("guidance_embeds"):
            inputs.append(torch.full((b,), 3.5, device=device, dtype=t))
            names.append("guidance")
        return FluxStep(), tuple(inputs), names

    class PixArtStep(Step):
        def forward(self, hidden_states, encoder_hidden_states, timestep):
            return self.net(hidden_states=hidden_states, encoder_hidden_states=encoder_hidden_states, timestep=timestep,
                            added_cond_kwargs={"resolution": None, "aspect_ratio": None}, return_dict=False)[0]

    inputs = [rand(b, config["in_channels"], lat, lat), rand(b, text, config["caption_channels"]),
              torch.full((b,), 999, device=device, dtype=torch.int64)]
    return PixArtStep(), tuple(inputs), ["hidden_states", "encoder_hidden_states", "timestep"]


def dynamic_axes(m: E2EModel) -> dict[str, dict[int, str]]:
    """The axes an Optimum-style export leaves symbolic, by input name: batch and the latent's height and
    width (a UNet's timestep and text embeddings follow the batch; Flux's image tokens and their positions
    follow the resolution). One file then serves every resolution."""
    spatial = {0: "batch", 2: "height", 3: "width"}
    if m.kind == "vae_decoder":
        return {"latent": spatial}
    if m.kind == "flux":
        return {"hidden_states": {0: "batch", 1: "tokens"}, "encoder_hidden_states": {0: "batch"},
                "pooled_projections": {0: "batch"}, "timestep": {0: "batch"}, "img_ids": {0: "tokens"},
                "guidance": {0: "batch"}}
    if m.transformer:
        axes = {"hidden_states": spatial, "encoder_hidden_states": {0: "batch"}, "timestep": {0: "batch"}}
        return {**axes, "pooled_projections": {0: "batch"}} if m.kind == "sd3" else axes
    axes = {"sample": spatial, "timestep": {0: "batch"}, "encoder_hidden_states": {0: "batch"}}
    if m.text_embeds:
        axes.update(text_embeds={0: "batch"}, time_ids={0: "batch"})
    return axes


def export(m: E2EModel, exporter: str, dtype: str, work: Path, device: str = "cuda", tiny: bool = False,
           log=print, dynamic: bool = False, side: int | None = None, layers: tuple | None = None,
           built: tuple | None = None) -> Path:
    """The model exported by `exporter` in `dtype`, in a directory of its own under `work` (made once;
    external data beside it when large). `ort` is ORT's transformers optimizer on the TorchScript fp32
    export (it refuses fp16 initializers), converted to fp16 after fusing as ORT's Stable Diffusion
    pipeline script does. `dynamic`: batch, height and width symbolic (`dynamic_axes` for TorchScript,
    `dynamic_shapes` for dynamo), as Optimum and most pipelines export; `side`: the image side the example
    inputs have (the export's own with static axes; default the model's); `layers`: the depth (build());
    `built`: build()'s (module, inputs, names) to export instead of building them."""
    at = f"@{side}" if side and side != m.side and not tiny else ""
    depth = f".L{m.depth(layers).replace('/', 'of')}" if layers else ""
    stem = f"{m.name}{'_tiny' if tiny else ''}{at}{depth}.{exporter}{'.dynamic' if dynamic else ''}.{dtype}"
    path = work / stem / f"{stem}.onnx"  # a directory each: TorchScript names external files by tensor
    if path.exists():
        return path
    if exporter not in EXPORTERS:
        raise ValueError(f"unknown exporter '{exporter}' (one of {', '.join(EXPORTERS)})")
    if exporter == "ort" and not m.ort_model_type:
        raise ValueError(f"ORT's transformers optimizer has no model type for {m.name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if exporter == "ort":
        fp32 = export(m, "torchscript", "fp32", work, device, tiny, log, dynamic, side, layers)
        return _ort_optimized(m, dtype, fp32, path)
    import torch

    module, inputs, names = built or build(m, dtype, device, tiny, side, layers)
    axes = dynamic_axes(m) if dynamic else {}
    log(f"  exporting {m.name} {dtype} with torch.onnx ({exporter}{', dynamic axes' if dynamic else ''}) ...")
    try:
        with torch.no_grad():
            if exporter == "torchscript":
                torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=17, input_names=names,
                                  output_names=["out"], dynamic_axes=axes or None)
            else:
                shapes = None
                if axes:
                    dims = {}  # one Dim per name: the batch is shared by every input that has it
                    shapes = tuple({i: dims.setdefault(d, torch.export.Dim.AUTO) for i, d in axes.get(n, {}).items()}
                                   or None for n in names)
                torch.onnx.export(module, inputs, str(path), dynamo=True, input_names=names, output_names=["out"],
                                  external_data=True, dynamic_shapes=shapes,
                                  **({"opset_version": 23} if exporter == "dynamo23" else {}))
    except Exception:
        shutil.rmtree(path.parent, ignore_errors=True)  # no half-written export is taken for one later
        raise
    if built is None:
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
