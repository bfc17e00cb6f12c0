"""The shapes real models run: every GroupNorm and softmax of a model, as data.

Each model cites its published configuration and writes the values the shapes follow from beside
them (`config`), so anyone can check a shape against the model card; `tests/runtime/test_zoo.py`
derives every shape again from those values, walking the model's architecture as diffusers and
transformers build it, and compares.

A shape is given per item of the batch (one image, one token) with how often one forward pass runs
it (`count`), so that a model's total is one UNet step, one VAE decode or one generated token:

- GroupNorm: (side, channels, silu, eps, count, where): NHWC activations of side x side pixels, 32
  groups (`norm_num_groups`); silu: the GroupNorm is followed by SiLU (every ResNet block's two norms
  and `conv_norm_out`), else it stands alone (a transformer block's input norm, the VAE's attention
  norm); `where` names the first module that runs it. The batch multiplies n.
- softmax: (rows, cols, count, where): last-axis softmax of rows x cols per item; the batch multiplies
  rows. Attention rows are heads x query tokens, cols the key tokens (77 text tokens for cross
  attention); a language model's vocabulary softmax is one row per token.

- attention: (heads, sq, skv, head_dim, causal, count, where): one multi-head attention per item; its
  softmax is the (heads * sq, skv) row of the softmax list. The batch multiplies b.

Stable Diffusion runs its UNet on 2 images per prompt (classifier-free guidance) and its VAE decoder
on 1; both batches are listed for each.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUPS = 32  # norm_num_groups of every Stable Diffusion UNet and VAE


@dataclass(frozen=True)
class GroupNormShape:
    side: int
    c: int
    silu: bool
    eps: float
    count: int
    where: str

    def problem(self, batch: int) -> tuple[int, int, int, int, bool]:
        """(n, hw, c, groups, silu) for `batch` items."""
        return batch, self.side * self.side, self.c, GROUPS, self.silu


@dataclass(frozen=True)
class SoftmaxShape:
    rows: int
    cols: int
    count: int
    where: str

    def problem(self, batch: int) -> tuple[int, int]:
        """(batch rows, n_cols) for `batch` items."""
        return batch * self.rows, self.cols


@dataclass(frozen=True)
class AttentionShape:
    heads: int
    sq: int
    skv: int
    head_dim: int
    causal: bool
    count: int
    where: str

    def problem(self, batch: int) -> tuple[int, int, int, int, int, bool]:
        """(batch, heads, sq, skv, head_dim, causal) for `batch` items."""
        return batch, self.heads, self.sq, self.skv, self.head_dim, self.causal


@dataclass(frozen=True)
class Model:
    name: str
    title: str
    source: str  # where the configuration is published
    config: dict  # the published values the shapes follow from
    batches: tuple[int, ...]
    batch_is: str  # what one item of the batch is
    group_norm: tuple[GroupNormShape, ...] = ()
    softmax: tuple[SoftmaxShape, ...] = ()
    attention: tuple[AttentionShape, ...] = ()


def _gn(*rows) -> tuple[GroupNormShape, ...]:
    return tuple(GroupNormShape(*r) for r in rows)


def _sm(*rows) -> tuple[SoftmaxShape, ...]:
    return tuple(SoftmaxShape(*r) for r in rows)


def _at(*rows) -> tuple[AttentionShape, ...]:
    return tuple(AttentionShape(*r) for r in rows)


_SD15_UNET = {
    "sample_size": 64, "block_out_channels": [320, 640, 1280, 1280], "layers_per_block": 2, "norm_num_groups": 32,
    "norm_eps": 1e-5, "attention_head_dim": 8, "cross_attention_dim": 768,
    "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
    "text_encoder.max_position_embeddings": 77,
}
_SDXL_UNET = {
    "sample_size": 128, "block_out_channels": [320, 640, 1280], "layers_per_block": 2, "norm_num_groups": 32,
    "norm_eps": 1e-5, "attention_head_dim": [5, 10, 20], "transformer_layers_per_block": [1, 2, 10],
    "cross_attention_dim": 2048,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "text_encoder.max_position_embeddings": 77,
}


def _vae(sample_size: int) -> dict:
    return {"sample_size": sample_size, "block_out_channels": [128, 256, 512, 512], "layers_per_block": 2,
            "norm_num_groups": 32, "latent_channels": 4,
            "up_block_types": ["UpDecoderBlock2D"] * 4, "mid_block_add_attention": True}


MODELS: dict[str, Model] = {m.name: m for m in (
    Model("sd15_unet", "Stable Diffusion 1.5 UNet, one denoising step at 512x512 (latent 64x64)",
          "huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5: unet/config.json, text_encoder/config.json",
          _SD15_UNET, (1, 2), "image",
          group_norm=_gn(
              (64, 320, True, 1e-5, 8, "down_blocks.0.resnets.0.norm1"),
              (64, 320, False, 1e-6, 5, "down_blocks.0.attentions.0.norm"),
              (32, 320, True, 1e-5, 1, "down_blocks.1.resnets.0.norm1"),
              (32, 640, True, 1e-5, 6, "down_blocks.1.resnets.0.norm2"),
              (32, 640, False, 1e-6, 5, "down_blocks.1.attentions.0.norm"),
              (16, 640, True, 1e-5, 1, "down_blocks.2.resnets.0.norm1"),
              (16, 1280, True, 1e-5, 6, "down_blocks.2.resnets.0.norm2"),
              (16, 1280, False, 1e-6, 5, "down_blocks.2.attentions.0.norm"),
              (8, 1280, True, 1e-5, 11, "down_blocks.3.resnets.0.norm1"),
              (8, 1280, False, 1e-6, 1, "mid_block.attentions.0.norm"),
              (8, 2560, True, 1e-5, 3, "up_blocks.0.resnets.0.norm1"),
              (16, 2560, True, 1e-5, 2, "up_blocks.1.resnets.0.norm1"),
              (16, 1920, True, 1e-5, 1, "up_blocks.1.resnets.2.norm1"),
              (32, 1920, True, 1e-5, 1, "up_blocks.2.resnets.0.norm1"),
              (32, 1280, True, 1e-5, 1, "up_blocks.2.resnets.1.norm1"),
              (32, 960, True, 1e-5, 1, "up_blocks.2.resnets.2.norm1"),
              (64, 960, True, 1e-5, 1, "up_blocks.3.resnets.0.norm1"),
              (64, 640, True, 1e-5, 2, "up_blocks.3.resnets.1.norm1")),
          softmax=_sm(
              (8 * 4096, 4096, 5, "down_blocks.0.attentions.0 self-attention"),
              (8 * 4096, 77, 5, "down_blocks.0.attentions.0 cross-attention"),
              (8 * 1024, 1024, 5, "down_blocks.1.attentions.0 self-attention"),
              (8 * 1024, 77, 5, "down_blocks.1.attentions.0 cross-attention"),
              (8 * 256, 256, 5, "down_blocks.2.attentions.0 self-attention"),
              (8 * 256, 77, 5, "down_blocks.2.attentions.0 cross-attention"),
              (8 * 64, 64, 1, "mid_block.attentions.0 self-attention"),
              (8 * 64, 77, 1, "mid_block.attentions.0 cross-attention")),
          attention=_at(
              (8, 4096, 4096, 40, False, 5, "down_blocks.0.attentions.0 self-attention"),
              (8, 4096, 77, 40, False, 5, "down_blocks.0.attentions.0 cross-attention"),
              (8, 1024, 1024, 80, False, 5, "down_blocks.1.attentions.0 self-attention"),
              (8, 1024, 77, 80, False, 5, "down_blocks.1.attentions.0 cross-attention"),
              (8, 256, 256, 160, False, 5, "down_blocks.2.attentions.0 self-attention"),
              (8, 256, 77, 160, False, 5, "down_blocks.2.attentions.0 cross-attention"),
              (8, 64, 64, 160, False, 1, "mid_block.attentions.0 self-attention"),
              (8, 64, 77, 160, False, 1, "mid_block.attentions.0 cross-attention"))),
    Model("sd15_vae_decoder", "Stable Diffusion 1.5 VAE decoder, one decode of a 512x512 image",
          "huggingface.co/stable-diffusion-v1-5/stable-diffusion-v1-5: vae/config.json", _vae(512), (1, 2), "image",
          group_norm=_gn(
              (64, 512, True, 1e-6, 10, "decoder.mid_block.resnets.0.norm1"),
              (64, 512, False, 1e-6, 1, "decoder.mid_block.attentions.0.group_norm"),
              (128, 512, True, 1e-6, 6, "decoder.up_blocks.1.resnets.0.norm1"),
              (256, 512, True, 1e-6, 1, "decoder.up_blocks.2.resnets.0.norm1"),
              (256, 256, True, 1e-6, 5, "decoder.up_blocks.2.resnets.0.norm2"),
              (512, 256, True, 1e-6, 1, "decoder.up_blocks.3.resnets.0.norm1"),
              (512, 128, True, 1e-6, 6, "decoder.up_blocks.3.resnets.0.norm2")),
          softmax=_sm((4096, 4096, 1, "decoder.mid_block.attentions.0 (one head)")),
          attention=_at((1, 4096, 4096, 512, False, 1, "decoder.mid_block.attentions.0 (one head)"))),
    Model("sdxl_unet", "Stable Diffusion XL base UNet, one denoising step at 1024x1024 (latent 128x128)",
          "huggingface.co/stabilityai/stable-diffusion-xl-base-1.0: unet/config.json", _SDXL_UNET, (1, 2), "image",
          group_norm=_gn(
              (128, 320, True, 1e-5, 8, "down_blocks.0.resnets.0.norm1"),
              (64, 320, True, 1e-5, 1, "down_blocks.1.resnets.0.norm1"),
              (64, 640, True, 1e-5, 6, "down_blocks.1.resnets.0.norm2"),
              (64, 640, False, 1e-6, 5, "down_blocks.1.attentions.0.norm"),
              (32, 640, True, 1e-5, 1, "down_blocks.2.resnets.0.norm1"),
              (32, 1280, True, 1e-5, 10, "down_blocks.2.resnets.0.norm2"),
              (32, 1280, False, 1e-6, 6, "down_blocks.2.attentions.0.norm"),
              (32, 2560, True, 1e-5, 2, "up_blocks.0.resnets.0.norm1"),
              (32, 1920, True, 1e-5, 1, "up_blocks.0.resnets.2.norm1"),
              (64, 1920, True, 1e-5, 1, "up_blocks.1.resnets.0.norm1"),
              (64, 1280, True, 1e-5, 1, "up_blocks.1.resnets.1.norm1"),
              (64, 960, True, 1e-5, 1, "up_blocks.1.resnets.2.norm1"),
              (128, 960, True, 1e-5, 1, "up_blocks.2.resnets.0.norm1"),
              (128, 640, True, 1e-5, 2, "up_blocks.2.resnets.1.norm1")),
          softmax=_sm(
              (10 * 4096, 4096, 10, "down_blocks.1.attentions.0 self-attention"),
              (10 * 4096, 77, 10, "down_blocks.1.attentions.0 cross-attention"),
              (20 * 1024, 1024, 60, "down_blocks.2.attentions.0 self-attention"),
              (20 * 1024, 77, 60, "down_blocks.2.attentions.0 cross-attention")),
          attention=_at(
              (10, 4096, 4096, 64, False, 10, "down_blocks.1.attentions.0 self-attention"),
              (10, 4096, 77, 64, False, 10, "down_blocks.1.attentions.0 cross-attention"),
              (20, 1024, 1024, 64, False, 60, "down_blocks.2.attentions.0 self-attention"),
              (20, 1024, 77, 64, False, 60, "down_blocks.2.attentions.0 cross-attention"))),
    Model("sdxl_vae_decoder", "Stable Diffusion XL VAE decoder, one decode of a 1024x1024 image",
          "huggingface.co/stabilityai/stable-diffusion-xl-base-1.0: vae/config.json", _vae(1024), (1, 2), "image",
          group_norm=_gn(
              (128, 512, True, 1e-6, 10, "decoder.mid_block.resnets.0.norm1"),
              (128, 512, False, 1e-6, 1, "decoder.mid_block.attentions.0.group_norm"),
              (256, 512, True, 1e-6, 6, "decoder.up_blocks.1.resnets.0.norm1"),
              (512, 512, True, 1e-6, 1, "decoder.up_blocks.2.resnets.0.norm1"),
              (512, 256, True, 1e-6, 5, "decoder.up_blocks.2.resnets.0.norm2"),
              (1024, 256, True, 1e-6, 1, "decoder.up_blocks.3.resnets.0.norm1"),
              (1024, 128, True, 1e-6, 6, "decoder.up_blocks.3.resnets.0.norm2")),
          softmax=_sm((16384, 16384, 1, "decoder.mid_block.attentions.0 (one head)")),
          attention=_at((1, 16384, 16384, 512, False, 1, "decoder.mid_block.attentions.0 (one head)"))),
    # Diffusion transformers: one joint attention over image and text tokens per block (the image's
    # (side / 8 / patch)^2 patches, then the text encoders' tokens), or self- and cross-attention (PixArt)
    Model("sd3_medium", "Stable Diffusion 3 medium MMDiT, one denoising step at 1024x1024 (latent 128x128)",
          "huggingface.co/stabilityai/stable-diffusion-3-medium-diffusers: transformer/config.json",
          {"sample_size": 128, "patch_size": 2, "num_layers": 24, "num_attention_heads": 24, "attention_head_dim": 64,
           "text_tokens": 77 + 256}, (1, 2), "image",
          softmax=_sm((24 * 4429, 4429, 24, "transformer_blocks.* joint attention")),
          attention=_at((24, 4429, 4429, 64, False, 24, "transformer_blocks.* joint attention"))),
    Model("flux_dev", "FLUX.1-dev, one denoising step at 1024x1024 (latent 128x128, 2x2 patches)",
          "huggingface.co/black-forest-labs/FLUX.1-dev: transformer/config.json",
          {"sample_size": 128, "patch_size": 2, "num_layers": 19, "num_single_layers": 38, "num_attention_heads": 24,
           "attention_head_dim": 128, "text_tokens": 512}, (1,), "image",
          softmax=_sm((24 * 4608, 4608, 57, "transformer_blocks.* and single_transformer_blocks.* joint attention")),
          attention=_at((24, 4608, 4608, 128, False, 57,
                         "transformer_blocks.* and single_transformer_blocks.* joint attention"))),
    Model("pixart_sigma", "PixArt-Sigma XL 1024, one denoising step at 1024x1024 (latent 128x128)",
          "huggingface.co/PixArt-alpha/PixArt-Sigma-XL-2-1024-MS: transformer/config.json",
          {"sample_size": 128, "patch_size": 2, "num_layers": 28, "num_attention_heads": 16, "attention_head_dim": 72,
           "text_tokens": 300}, (1, 2), "image",
          softmax=_sm((16 * 4096, 4096, 28, "transformer_blocks.*.attn1 self-attention"),
                      (16 * 4096, 300, 28, "transformer_blocks.*.attn2 cross-attention")),
          attention=_at((16, 4096, 4096, 72, False, 28, "transformer_blocks.*.attn1 self-attention"),
                        (16, 4096, 300, 72, False, 28, "transformer_blocks.*.attn2 cross-attention"))),
    Model("gpt2", "GPT-2: the logits' softmax over the vocabulary", "huggingface.co/openai-community/gpt2: config.json",
          {"vocab_size": 50257}, (1, 16, 128), "token", softmax=_sm((1, 50257, 1, "lm_head logits"))),
    Model("llama2", "Llama 2 (7B, 13B, 70B): the logits' softmax over the vocabulary",
          "huggingface.co/meta-llama/Llama-2-7b-hf: config.json", {"vocab_size": 32000}, (1, 16, 128), "token",
          softmax=_sm((1, 32000, 1, "lm_head logits"))),
    Model("llama3", "Llama 3 / 3.1 (8B, 70B): the logits' softmax over the vocabulary",
          "huggingface.co/meta-llama/Meta-Llama-3-8B: config.json", {"vocab_size": 128256}, (1, 16, 128), "token",
          softmax=_sm((1, 128256, 1, "lm_head logits"))),
    Model("qwen2", "Qwen2 (0.5B, 1.5B): the logits' softmax over the vocabulary",
          "huggingface.co/Qwen/Qwen2-1.5B: config.json", {"vocab_size": 151936}, (1, 16, 128), "token",
          softmax=_sm((1, 151936, 1, "lm_head logits"))),
    Model("bert_base_128", "BERT-base, one sequence of 128 tokens: attention in each of 12 layers",
          "huggingface.co/google-bert/bert-base-uncased: config.json",
          {"num_attention_heads": 12, "num_hidden_layers": 12, "sequence_length": 128}, (1, 8), "sequence",
          softmax=_sm((12 * 128, 128, 12, "encoder.layer.*.attention.self")),
          attention=_at((12, 128, 128, 64, False, 12, "encoder.layer.*.attention.self"))),
    Model("bert_base_512", "BERT-base, one sequence of 512 tokens (max_position_embeddings)",
          "huggingface.co/google-bert/bert-base-uncased: config.json",
          {"num_attention_heads": 12, "num_hidden_layers": 12, "max_position_embeddings": 512}, (1, 8), "sequence",
          softmax=_sm((12 * 512, 512, 12, "encoder.layer.*.attention.self")),
          attention=_at((12, 512, 512, 64, False, 12, "encoder.layer.*.attention.self"))),
    Model("vit_b16", "ViT-B/16 at 224x224: 196 patches and the class token, 12 layers",
          "huggingface.co/google/vit-base-patch16-224: config.json",
          {"image_size": 224, "patch_size": 16, "num_attention_heads": 12, "num_hidden_layers": 12}, (1, 8), "image",
          softmax=_sm((12 * 197, 197, 12, "encoder.layer.*.attention.attention")),
          attention=_at((12, 197, 197, 64, False, 12, "encoder.layer.*.attention.attention"))),
    Model("llama2_prefill", "Llama 2 7B, the prefill of a 2048-token prompt: causal attention in 32 layers",
          "huggingface.co/meta-llama/Llama-2-7b-hf: config.json",
          {"num_attention_heads": 32, "hidden_size": 4096, "num_hidden_layers": 32, "prompt_tokens": 2048}, (1,),
          "prompt", attention=_at((32, 2048, 2048, 128, True, 32, "model.layers.*.self_attn"))),
)}


def models(name: str) -> list[Model]:
    """The model called `name`, or every model for "all"; a clear error names the known ones."""
    if name == "all":
        return list(MODELS.values())
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}: choose from all, {', '.join(MODELS)}")
    return [MODELS[name]]


def group_norm_problems(selected=None) -> list[tuple[int, int, int, int, bool]]:
    """Distinct (n, hw, c, groups, silu) of every GroupNorm of the models (default: all), every batch."""
    out = []
    for m in selected or MODELS.values():
        for b in m.batches:
            out += [s.problem(b) for s in m.group_norm]
    return list(dict.fromkeys(out))


def attention_problems(selected=None) -> list[tuple[int, int, int, int, int, bool]]:
    """Distinct (batch, heads, sq, skv, head_dim, causal) of every attention of the models, every batch."""
    out = []
    for m in selected or MODELS.values():
        for b in m.batches:
            out += [s.problem(b) for s in m.attention]
    return list(dict.fromkeys(out))


def softmax_problems(selected=None) -> list[tuple[int, int]]:
    """Distinct (batch rows, n_cols) of every softmax of the models (default: all), every batch."""
    out = []
    for m in selected or MODELS.values():
        for b in m.batches:
            out += [s.problem(b) for s in m.softmax]
    return list(dict.fromkeys(out))
