"""A tiny random-weight Stable Diffusion 1.5-style pipeline (diffusers' classes, SD 1.5's block types, a CLIP text
encoder and a 54-token CLIP tokenizer made here), saved as diffusers saves one: what `optimum-cli export onnx --task
text-to-image` reads.

    python tests/runtime/ortlib/rewrite/tiny_pipeline.py OUT     # writes OUT (a diffusers pipeline folder)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def save(out: Path) -> Path:
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    torch.manual_seed(0)
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "vocab.json").write_text(json.dumps(vocab))
        (Path(tmp) / "merges.txt").write_text("#version: 0.2\n")
        tokenizer = CLIPTokenizer(str(Path(tmp) / "vocab.json"), str(Path(tmp) / "merges.txt"), model_max_length=16)
    text = CLIPTextModel(CLIPTextConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=16,
                                        projection_dim=32, bos_token_id=0, eos_token_id=1, pad_token_id=1))
    unet = UNet2DConditionModel(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                attention_head_dim=8, norm_num_groups=32)
    vae = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64), latent_channels=4,
                        norm_num_groups=32, sample_size=16)
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tokenizer, unet=unet,
                                   scheduler=DDIMScheduler(), safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)
    pipe.save_pretrained(out)
    return out


if __name__ == "__main__":
    print(save(Path(sys.argv[1])))
