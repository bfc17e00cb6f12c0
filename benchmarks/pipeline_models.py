"""Whole text-to-image pipelines from their published configs, random weights, saved as diffusers saves them: what
`optimum-cli export onnx --task text-to-image` reads and what diffusers' own pipeline loads.

SD 1.5 (stable-diffusion-v1-5/stable-diffusion-v1-5): its UNet and VAE configs (e2e_models.py), its text encoder's
(CLIP ViT-L/14: 12 layers of 768, 77 positions, 49408 tokens) and a DDIM scheduler. The tokenizer is a CLIP tokenizer
of the 54 letters and specials made here (the real vocabulary is a download; random weights make any token ids as
good as others). `tiny=True`: the same classes at widths of 32 and 64, for CPU tests.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

PIPELINES = ("sd15",)
_CLIP_L = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
           "max_position_embeddings": 77, "projection_dim": 768, "vocab_size": 49408, "hidden_act": "quick_gelu"}
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


def save(name: str, out: Path, tiny: bool = False, dtype: str = "fp32") -> Path:
    """Pipeline `name` (PIPELINES) saved into `out` (a diffusers pipeline folder), weights drawn with seed 0."""
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from benchmarks.e2e_models import _SD15_UNET, _VAE

    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline '{name}' (one of {', '.join(PIPELINES)})")
    torch.manual_seed(0)
    clip = _TINY_CLIP if tiny else _CLIP_L
    tokenizer, letters = _tokenizer(clip["max_position_embeddings"])
    text = CLIPTextModel(CLIPTextConfig(**{"vocab_size": letters, **clip}, bos_token_id=0, eos_token_id=1,
                                        pad_token_id=1))
    unet = UNet2DConditionModel(**(_TINY_UNET if tiny else _SD15_UNET))
    vae = AutoencoderKL(**(_TINY_VAE if tiny else {**_VAE, "sample_size": 512}))
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet,
                                   scheduler=DDIMScheduler(), safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)
    if dtype == "fp16":
        pipe = pipe.to(torch.float16)
    pipe.save_pretrained(out)
    return out
