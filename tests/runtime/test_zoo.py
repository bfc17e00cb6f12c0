"""The zoo against the configurations it cites: every shape derived again from each model's published
values by walking the architecture as diffusers (UNet2DConditionModel, AutoencoderKL's decoder) and
transformers build it, then compared with the zoo's data, counts and all."""

from __future__ import annotations

from collections import Counter

import pytest
from tritonforge.runtime import zoo


def unet_shapes(cfg: dict):
    """GroupNorm (side, c, silu, eps) and softmax (rows, cols) of one UNet2DConditionModel step, one image."""
    gn, sm = [], []
    side, chans, layers = cfg["sample_size"], cfg["block_out_channels"], cfg["layers_per_block"]
    blocks = len(chans)
    heads = cfg["attention_head_dim"]  # diffusers reads it as the head count for these checkpoints
    heads = heads if isinstance(heads, list) else [heads] * blocks
    depth = cfg.get("transformer_layers_per_block", 1)
    depth = depth if isinstance(depth, list) else [depth] * blocks
    text = cfg["text_encoder.max_position_embeddings"]

    def resnet(cin, cout, s):  # norm1 (+ SiLU) on the input, norm2 (+ SiLU) on the output channels
        gn.extend([(s, cin, True, cfg["norm_eps"]), (s, cout, True, cfg["norm_eps"])])

    def transformer(c, s, h, n):  # Transformer2DModel: one GroupNorm (eps 1e-6), then n blocks
        gn.append((s, c, False, 1e-6))
        sm.extend([(h * s * s, s * s), (h * s * s, text)] * n)

    skips = [(chans[0], side)]  # conv_in's output
    c = chans[0]
    for i, kind in enumerate(cfg["down_block_types"]):
        for _ in range(layers):
            resnet(c, chans[i], side)
            c = chans[i]
            if kind.startswith("CrossAttn"):
                transformer(c, side, heads[i], depth[i])
            skips.append((c, side))
        if i < blocks - 1:  # a downsampler's output is a skip too
            side //= 2
            skips.append((c, side))
    resnet(c, c, side)
    transformer(c, side, heads[-1], depth[-1])
    resnet(c, c, side)
    for i, kind in enumerate(cfg["up_block_types"]):
        out = chans[blocks - 1 - i]
        for _ in range(layers + 1):
            skip_c, skip_side = skips.pop()
            assert skip_side == side
            resnet(c + skip_c, out, side)  # the skip is concatenated on channels
            c = out
            if kind.startswith("CrossAttn"):
                transformer(c, side, heads[blocks - 1 - i], depth[blocks - 1 - i])
        if i < blocks - 1:
            side *= 2
    gn.append((side, c, True, cfg["norm_eps"]))  # conv_norm_out, then SiLU
    assert not skips
    return gn, sm


def vae_decoder_shapes(cfg: dict):
    """AutoencoderKL's decoder (eps 1e-6 throughout): mid block with one single-head attention, then
    layers_per_block + 1 ResNets per up block, upsampling between blocks."""
    chans, layers = cfg["block_out_channels"], cfg["layers_per_block"]
    side = cfg["sample_size"] // 2 ** (len(chans) - 1)
    c = chans[-1]
    gn = [(side, c, True, 1e-6)] * 2
    gn.append((side, c, False, 1e-6))
    sm = [(side * side, side * side)]
    gn += [(side, c, True, 1e-6)] * 2
    for i, out in enumerate(reversed(chans)):
        for _ in range(layers + 1):
            gn.extend([(side, c, True, 1e-6), (side, out, True, 1e-6)])
            c = out
        if i < len(chans) - 1:
            side *= 2
    gn.append((side, c, True, 1e-6))
    return gn, sm


def zoo_counts(model):
    gn = Counter({(s.side, s.c, s.silu, s.eps): s.count for s in model.group_norm})
    sm = Counter({(s.rows, s.cols): s.count for s in model.softmax})
    return gn, sm


@pytest.mark.parametrize("name", ["sd15_unet", "sdxl_unet"])
def test_unet_shapes_follow_the_config(name):
    model = zoo.MODELS[name]
    gn, sm = unet_shapes(model.config)
    assert zoo_counts(model) == (Counter(gn), Counter(sm))
    assert len({(s.side, s.c, s.silu, s.eps) for s in model.group_norm}) == len(model.group_norm)


def test_sd15_unet_counts_match_the_module_tree():
    # 16 + 4 + 24 ResNet norms, 16 transformer norms, conv_norm_out: 61 GroupNorm modules; 16 transformer
    # blocks of two attentions each
    model = zoo.MODELS["sd15_unet"]
    assert sum(s.count for s in model.group_norm) == 61
    assert sum(s.count for s in model.softmax) == 32


@pytest.mark.parametrize("name", ["sd15_vae_decoder", "sdxl_vae_decoder"])
def test_vae_decoder_shapes_follow_the_config(name):
    model = zoo.MODELS[name]
    gn, sm = vae_decoder_shapes(model.config)
    assert zoo_counts(model) == (Counter(gn), Counter(sm))
    assert max(s.side for s in model.group_norm) == model.config["sample_size"]  # the decoder ends at full size


@pytest.mark.parametrize("name", ["gpt2", "llama2", "llama3", "qwen2"])
def test_vocabulary_rows_follow_the_config(name):
    model = zoo.MODELS[name]
    assert [(s.rows, s.cols) for s in model.softmax] == [(1, model.config["vocab_size"])]
    assert model.batches == (1, 16, 128)


def test_attention_rows_follow_the_config():
    for name, tokens in (("bert_base_128", 128), ("bert_base_512", 512), ("vit_b16", (224 // 16) ** 2 + 1)):
        model = zoo.MODELS[name]
        cfg = model.config
        assert [(s.rows, s.cols, s.count) for s in model.softmax] == \
            [(cfg["num_attention_heads"] * tokens, tokens, cfg["num_hidden_layers"])], name


def dit_attention(cfg: dict, name: str):
    """(heads, sq, skv, head_dim, count) of a diffusion transformer's attentions, one image: the latent's patches,
    then (joint attention) the text tokens in the same sequence, or (PixArt) cross-attention over them."""
    patches = (cfg["sample_size"] // cfg["patch_size"]) ** 2
    heads, d, text = cfg["num_attention_heads"], cfg["attention_head_dim"], cfg["text_tokens"]
    if name == "pixart_sigma":
        return [(heads, patches, patches, d, cfg["num_layers"]), (heads, patches, text, d, cfg["num_layers"])]
    joint = patches + text
    return [(heads, joint, joint, d, cfg["num_layers"] + cfg.get("num_single_layers", 0))]


@pytest.mark.parametrize("name", ["sd3_medium", "flux_dev", "pixart_sigma"])
def test_diffusion_transformer_attention_follows_the_config(name):
    model = zoo.MODELS[name]
    assert [(s.heads, s.sq, s.skv, s.head_dim, s.count) for s in model.attention] == dit_attention(model.config, name)
    assert [(s.rows, s.cols, s.count) for s in model.softmax] == \
        [(s.heads * s.sq, s.skv, s.count) for s in model.attention]


def test_problems_are_distinct_and_cover_every_batch():
    sd = [zoo.MODELS["sd15_unet"]]
    gn = zoo.group_norm_problems(sd)
    assert len(gn) == len(set(gn)) == 2 * len(sd[0].group_norm)
    assert (2, 64 * 64, 320, 32, True) in gn and (2, 64 * 64, 320, 32, False) in gn and (1, 8 * 8, 2560, 32, True) in gn
    assert zoo.softmax_problems([zoo.MODELS["qwen2"]]) == [(1, 151936), (16, 151936), (128, 151936)]
    assert (2 * 8 * 4096, 4096) in zoo.softmax_problems(sd)


def test_unknown_model_is_named():
    with pytest.raises(KeyError, match="unknown model 'sd3'.*sd15_unet"):
        zoo.models("sd3")
    assert len(zoo.models("all")) == len(zoo.MODELS)
