"""GroupNorm tables: what ORT's group and the tiled groups promise about their variants (no GPU)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("triton")

from pipeline.contracts import evaluate  # noqa: E402
from pipeline.table import load_table  # noqa: E402

UNET = [(n, h, c) for n in (1, 2) for h in (8, 16, 32, 64) for c in (320, 640, 1280)]


@pytest.fixture(scope="module")
def table(root):
    return load_table([root / "kernels" / "group_norm_triton.py", root / "kernels" / "group_norm_split_triton.py"])


def admitted(table, group, **problem):
    contract = table.contracts[group]
    out = []
    for k in table.kernels:
        if k.group != group:
            continue
        scope = {**problem, **k.constants, "num_warps": k.num_warps, "resident": 10_000}
        if all(evaluate(r, scope) for r in contract["requires"]):
            out.append(k)
    return out


def test_orts_group_keeps_orts_constants_and_names(table):
    """ORT's C++ reads BLOCK_SIZE and HW_SIZE with .at(); names become C symbols; constants are ints."""
    orts = [k for k in table.kernels if k.group.startswith("GroupNormTriton_")]
    assert orts
    for k in orts:
        assert {"BLOCK_SIZE", "HW_SIZE", "ACTIVATION_SILU", "KEEP_FIRST"} <= set(k.constants), k.name
        assert all(type(v) is int for v in k.constants.values()), k.name
        assert re.fullmatch(r"[A-Za-z0-9_]+", k.name), k.name
        assert k.name.endswith("_keep") == bool(k.constants["KEEP_FIRST"]), k.name


def test_keep_kernels_hold_at_most_32_values_per_thread(table):
    keep = [k for k in table.kernels if k.group == "GroupNormTriton_Silu_fp32" and k.constants["KEEP_FIRST"]]
    assert keep
    for k in keep:
        values = k.constants["BLOCK_SIZE"] * k.constants["HW_SIZE"]
        assert 2048 <= values <= 16384, k.name
        assert values // (32 * k.num_warps) <= 32, k.name  # fp32 values per thread


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
def test_small_unet_levels_have_a_whole_group_kernel_in_orts_group(table, dtype):
    """16x16, and 32x32 at 320 channels: some kernel ORT itself would pick reads each group once."""
    for n, h, c in UNET:
        block = 1 << (c // 32 - 1).bit_length()
        if h * h not in (256, 1024) or block * h * h > 16384:
            continue
        ks = admitted(table, f"GroupNormTriton_Silu_{dtype}", n=n, hw=h * h, c=c, groups=32, c_per_group=c // 32,
                      silu=1)
        assert any(k.constants["KEEP_FIRST"] and k.constants["HW_SIZE"] == h * h for k in ks), (n, h, c)


def test_l2_kernels_are_aligned_looped_kernels(table):
    l2 = [k for k in table.kernels if k.constants.get("KEEP_IN_L2")]
    assert l2 and all(k.name.endswith("_l2") for k in l2)
    for k in l2:
        assert k.group.startswith("GroupNormSplit_") and not k.constants["ONE_TILE"], k.name
    plain = {k.name for k in table.kernels if k.group.startswith("GroupNormSplit_") and not k.constants["ONE_TILE"]
             and not k.constants["KEEP_IN_L2"]}
    assert all(k.name.removesuffix("_l2") in plain for k in l2)  # the same tiles, with cache hints


def test_every_unet_shape_has_tiled_candidates(table):
    for n, h, c in UNET:
        ks = admitted(table, "GroupNormSplit_Silu_fp16", n=n, hw=h * h, c=c, groups=32, c_per_group=c // 32, silu=1)
        assert any(k.constants["KEEP_IN_L2"] for k in ks), (n, h, c)
        assert any(not k.constants["KEEP_IN_L2"] for k in ks), (n, h, c)
