"""Whole text-to-image pipelines from their published configs, random weights, saved as diffusers saves them: what
`optimum-cli export onnx --task text-to-image` reads and what diffusers' own pipeline loads.

SD 1.5 (stable-diffusion-v1-5/stable-diffusion-v1-5): its UNet and VAE configs (e2e_models.py), its text encoder's
(CLIP ViT-L/14: 12 layers of 768, 77 positions, 49408 tokens) and a DDIM scheduler. SDXL
(stabilityai/stable-diffusion-xl-base-1.0): its UNet (e2e_models.py), CLIP-L and CLIP-G (32 layers of 1280, with its
projection), the VAE with SDXL's scaling factor kept in fp16 (as the fp16-fixed VAE users run; random weights do not
overflow) and the Euler scheduler. SD3-medium (stabilityai/stable-diffusion-3-medium-diffusers): its transformer
(e2e_models.py), CLIP-L and CLIP-G with their projections, T5 v1.1 XXL's encoder, a 16-channel VAE and the
flow-matching Euler scheduler. FLUX.1-dev (black-forest-labs/FLUX.1-dev): its transformer (e2e_models.py), CLIP-L's
pooled output, T5 v1.1 XXL's encoder (512 tokens), the 16-channel VAE and the flow-matching scheduler with its
resolution-dependent shift. `layers` cuts a transformer's depth (SD3: its blocks; Flux: its double- and single-stream
blocks) where a GPU's time limits need it. The tokenizers are made here: CLIP's of the 54 letters and specials, T5's a
unigram model of the letters (the real vocabularies are downloads; random weights make any token ids as good as
others). `tiny=True`: the same classes at widths of 32 and 64, for CPU tests.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

PIPELINES = ("sd15", "sdxl", "sd3", "flux")
DEPTH_CUT = ("sd3", "flux")  # the pipelines whose transformer `layers` cuts
_CLIP_L = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
           "max_position_embeddings": 77, "projection_dim": 768, "vocab_size": 49408, "hidden_act": "quick_gelu"}
_CLIP_G = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 20,
           "max_position_embeddings": 77, "projection_dim": 1280, "vocab_size": 49408, "hidden_act": "gelu"}
_T5_XXL = {"d_model": 4096, "d_ff": 10240, "num_layers": 24, "num_heads": 64, "d_kv": 64, "vocab_size": 32128,
           "feed_forward_proj": "gated-gelu"}
_TINY_T5 = {"d_model": 32, "d_ff": 64, "num_layers": 2, "num_heads": 4, "d_kv": 8}
_TINY_SD3 = {"sample_size": 8, "patch_size": 2, "in_channels": 4, "num_layers": 2, "attention_head_dim": 8,
             "num_attention_heads": 4, "joint_attention_dim": 32, "caption_projection_dim": 32,
             "pooled_projection_dim": 64, "out_channels": 4, "pos_embed_max_size": 16}
_TINY_CLIP = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "max_position_embeddings": 16, "projection_dim": 32}
_TINY_UNET = {"sample_size": 8, "in_channels": 4, "out_channels": 4, "layers_per_block": 1,
              "block_out_channels": (32, 64), "down_block_types": ("CrossAttnDownBlock2D", "DownBlock2D"),
              "up_block_types": ("UpBlock2D", "CrossAttnUpBlock2D"), "cross_attention_dim": 32,
              "attention_head_dim": 8, "norm_num_groups": 32}
_TINY_VAE = {"in_channels": 3, "out_channels": 3, "down_block_types": ("DownEncoderBlock2D",) * 2,
             "up_block_types": ("UpDecoderBlock2D",) * 2, "block_out_channels": (32, 64), "latent_channels": 4,
             "norm_num_groups": 32, "sample_size": 16}


def _tokenizer(max_length: int):
    from transformers import CLIPTokenizer

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "vocab.json").write_text(json.dumps(vocab))
        (Path(tmp) / "merges.txt").write_text("#version: 0.2\n")
        return CLIPTokenizer(str(Path(tmp) / "vocab.json"), str(Path(tmp) / "merges.txt"),
                             model_max_length=max_length), len(vocab)


def export(pipeline_dir: Path, out: Path, fp16_on_cuda: bool = False, timeout: float = 1800.0):
    """`optimum-cli export onnx --task text-to-image` of a saved pipeline into `out` (fp16 on the GPU when asked), in a
    process of its own; returns the finished process (its returncode and stderr say how it went)."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "optimum.commands.optimum_cli", "export", "onnx", "--model", str(pipeline_dir),
            "--task", "text-to-image", *(["--dtype", "fp16", "--device", "cuda"] if fp16_on_cuda else []), str(out)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def _t5_tokenizer(max_length: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import T5TokenizerFast

    vocab = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), *((c, -1.0) for c in "abcdefghijklmnopqrstuvwxyz"),
             ("\u2581", -1.0)]
    unigram = Tokenizer(models.Unigram(vocab, unk_id=2))
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    with tempfile.TemporaryDirectory() as tmp:
        unigram.save(str(Path(tmp) / "tokenizer.json"))
        return T5TokenizerFast(tokenizer_file=str(Path(tmp) / "tokenizer.json"), model_max_length=max_length,
                               pad_token="<pad>", eos_token="</s>", unk_token="<unk>", extra_ids=0), len(vocab)


def save(name: str, out: Path, tiny: bool = False, dtype: str = "fp32", layers: tuple[int, ...] = ()) -> Path:
    """Pipeline `name` (PIPELINES) saved into `out` (a diffusers pipeline folder), weights drawn with seed 0;
    `layers` (module docstring) for sd3 and flux only."""
    import torch

    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline '{name}' (one of {', '.join(PIPELINES)})")
    if layers and name not in DEPTH_CUT:
        raise ValueError(f"pipeline '{name}': layers is for the transformers of sd3 and flux")
    torch.manual_seed(0)
    pipe = {"sd15": _sd15, "sdxl": _sdxl, "sd3": _sd3, "flux": _flux}[name](tiny, *layers)
    if dtype == "fp16":
        pipe = pipe.to(torch.float16)
    pipe.save_pretrained(out)
    return out


def _clip(config: dict, letters: int, projection: bool):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    cls = CLIPTextModelWithProjection if projection else CLIPTextModel
    return cls(CLIPTextConfig(**{"vocab_size": letters, **config}, bos_token_id=0, eos_token_id=1, pad_token_id=1))


def _sd15(tiny: bool):
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel

    from benchmarks.e2e_models import _SD15_UNET, _VAE

    clip = _TINY_CLIP if tiny else _CLIP_L
    tokenizer, letters = _tokenizer(clip["max_position_embeddings"])
    return StableDiffusionPipeline(
        vae=AutoencoderKL(**(_TINY_VAE if tiny else {**_VAE, "sample_size": 512})),
        text_encoder=_clip(clip, letters, False), tokenizer=tokenizer,
        unet=UNet2DConditionModel(**(_TINY_UNET if tiny else _SD15_UNET)),
        scheduler=DDIMScheduler(), safety_checker=None, feature_extractor=None, requires_safety_checker=False)


def _sdxl(tiny: bool):
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel

    from benchmarks.e2e_models import _SDXL_UNET, _VAE

    clip_l, clip_g = (_TINY_CLIP, _TINY_CLIP) if tiny else (_CLIP_L, _CLIP_G)
    tokenizer, letters = _tokenizer(clip_l["max_position_embeddings"])
    # the UNet reads both encoders' hidden states side by side, and the time ids (6 of them) beside the pooled CLIP-G
    unet = _SDXL_UNET if not tiny else {
        **_TINY_UNET, "cross_attention_dim": clip_l["hidden_size"] + clip_g["hidden_size"],
        "addition_embed_type": "text_time", "addition_time_embed_dim": 8, "use_linear_projection": True,
        "projection_class_embeddings_input_dim": 6 * 8 + clip_g["projection_dim"]}
    return StableDiffusionXLPipeline(
        vae=AutoencoderKL(**(_TINY_VAE if tiny else {**_VAE, "sample_size": 1024}), scaling_factor=0.13025,
                          force_upcast=False),
        text_encoder=_clip(clip_l, letters, False), tokenizer=tokenizer,
        text_encoder_2=_clip(clip_g, letters, True), tokenizer_2=tokenizer,
        unet=UNet2DConditionModel(**unet),
        scheduler=EulerDiscreteScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                                         timestep_spacing="leading", steps_offset=1),
        force_zeros_for_empty_prompt=True)


def _sd3(tiny: bool, blocks: int = 0):
    from diffusers import (
        AutoencoderKL,
        FlowMatchEulerDiscreteScheduler,
        SD3Transformer2DModel,
        StableDiffusion3Pipeline,
    )
    from transformers import T5Config, T5EncoderModel

    from benchmarks.e2e_models import _SD3_MEDIUM, _VAE

    clip_l, clip_g = (_TINY_CLIP, _TINY_CLIP) if tiny else (_CLIP_L, _CLIP_G)
    tokenizer, letters = _tokenizer(clip_l["max_position_embeddings"])
    t5_tokenizer, t5_letters = _t5_tokenizer(16 if tiny else 256)
    t5 = T5EncoderModel(T5Config(**{**(_TINY_T5 if tiny else _T5_XXL), "vocab_size": t5_letters}))
    vae = {**_TINY_VAE, "latent_channels": 4} if tiny else {**_VAE, "latent_channels": 16, "sample_size": 1024}
    return StableDiffusion3Pipeline(
        transformer=SD3Transformer2DModel(**{**(_TINY_SD3 if tiny else _SD3_MEDIUM),
                                             **({"num_layers": blocks} if blocks else {})}),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0),
        vae=AutoencoderKL(**vae, use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.0609,
                          scaling_factor=1.5305),
        text_encoder=_clip(clip_l, letters, True), tokenizer=tokenizer,
        text_encoder_2=_clip(clip_g, letters, True), tokenizer_2=tokenizer,
        text_encoder_3=t5, tokenizer_3=t5_tokenizer)


def _flux(tiny: bool, double: int = 0, single: int = 0):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, FluxPipeline, FluxTransformer2DModel
    from transformers import T5Config, T5EncoderModel

    from benchmarks.e2e_models import _FLUX_DEV, _VAE

    clip = _TINY_CLIP if tiny else _CLIP_L
    tokenizer, letters = _tokenizer(clip["max_position_embeddings"])
    t5_tokenizer, t5_letters = _t5_tokenizer(16 if tiny else 512)
    t5 = T5EncoderModel(T5Config(**{**(_TINY_T5 if tiny else _T5_XXL), "vocab_size": t5_letters}))
    vae = {**_TINY_VAE, "latent_channels": 4} if tiny else {**_VAE, "latent_channels": 16, "sample_size": 1024}
    # 2x2 latent patches: the transformer takes 4 latent channels per token; it reads T5's width and CLIP's pooled
    transformer = _FLUX_DEV if not tiny else {
        "in_channels": 4 * vae["latent_channels"], "num_layers": 1, "num_single_layers": 2,
        "attention_head_dim": 16, "num_attention_heads": 2, "joint_attention_dim": _TINY_T5["d_model"],
        "pooled_projection_dim": clip["hidden_size"], "guidance_embeds": True, "axes_dims_rope": [4, 6, 6]}
    depth = {**({"num_layers": double} if double else {}), **({"num_single_layers": single} if single else {})}
    return FluxPipeline(
        transformer=FluxTransformer2DModel(**{**transformer, **depth}),
        scheduler=FlowMatchEulerDiscreteScheduler(shift=3.0, use_dynamic_shifting=True, base_shift=0.5, max_shift=1.15,
                                                  base_image_seq_len=256, max_image_seq_len=4096),
        vae=AutoencoderKL(**vae, use_quant_conv=False, use_post_quant_conv=False, shift_factor=0.1159,
                          scaling_factor=0.3611),
        text_encoder=_clip(clip, letters, False), tokenizer=tokenizer,
        text_encoder_2=t5, tokenizer_2=t5_tokenizer)
