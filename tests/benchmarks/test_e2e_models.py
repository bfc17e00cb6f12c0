"""The end-to-end models are the published ones: their configs agree with the zoo's (runtime/zoo.py),
whose shapes tests/runtime/test_zoo.py derives from the same files; no torch is needed to list them."""

from __future__ import annotations

import pytest
from tritonforge.runtime import zoo

from benchmarks import e2e_models


@pytest.mark.parametrize("name", sorted(n for n, m in e2e_models.MODELS.items() if not m.transformer))
def test_each_config_is_the_zoos(name):
    m = e2e_models.MODELS[name]
    published = zoo.MODELS[name].config
    shared = {k for k in published if k in m.config}
    assert {"block_out_channels", "layers_per_block", "norm_num_groups"} <= shared
    assert {k: m.config[k] for k in shared} == {k: published[k] for k in shared}
    assert m.side == published.get("sample_size", 0) * (8 if m.kind == "unet" else 1)
    assert m.batch in zoo.MODELS[name].batches


@pytest.mark.parametrize("name", ["sd3_medium", "flux_dev", "pixart_sigma"])
def test_each_transformer_config_is_the_zoos(name):
    m, published = e2e_models.MODELS[name], zoo.MODELS[name].config
    for key in ("num_layers", "num_single_layers", "num_attention_heads", "attention_head_dim"):
        assert m.config.get(key) == published.get(key), key
    assert m.side == published["sample_size"] * 8 and e2e_models.DIT_TEXT[m.kind] == published["text_tokens"]
    assert m.batch in zoo.MODELS[name].batches


def test_a_reduced_depth_is_named():
    flux = e2e_models.MODELS["flux_dev"]
    assert flux.depth((4, 8)) == "4/19+8/38" and flux.depth(None) == ""
    assert e2e_models.MODELS["sd3_medium"].depth((6,)) == "6/24"


def test_models_are_chosen_by_name_and_unknown_ones_named():
    assert [m.name for m in e2e_models.models("sd15_unet, sdxl_vae_decoder")] == ["sd15_unet", "sdxl_vae_decoder"]
    assert len(e2e_models.models("all")) == 8
    with pytest.raises(KeyError, match="unknown model.s. sd3; known: sd15_vae_decoder"):
        e2e_models.models("sd3")
