"""ORT's GroupNorm group (ORT's names, constants and rules) and GroupNormAny, the fallback of every shape."""

from __future__ import annotations

import re

import pytest

from .conftest import UNET, admitted


def test_orts_group_keeps_orts_constants_and_names(table):
    """ORT's C++ reads BLOCK_SIZE and HW_SIZE with .at(); names become C symbols; constants are ints."""
    for k in table.kernels:
        assert {"BLOCK_SIZE", "HW_SIZE", "ACTIVATION_SILU", "TILES"} <= set(k.constants), k.name
        assert all(type(v) is int for v in k.constants.values()), k.name
        assert re.fullmatch(r"[A-Za-z0-9_]+", k.name) and k.name.startswith(k.group), k.name


def step_values(k) -> int:
    return k.constants["TILES"] * k.constants["HW_SIZE"] * k.constants["BLOCK_SIZE"]


def test_a_step_holds_at_most_64_values_per_thread(table):
    """A step is summed while the next one loads: past 64 values a thread the two outgrow the registers."""
    ort = [k for k in table.kernels if k.group == "GroupNormTriton_Silu_fp32"]
    assert ort
    for k in ort:
        assert step_values(k) // (32 * k.num_warps) <= 64, k.name


def test_orts_groups_are_orts_dtypes(table):
    """ORT's GroupNorm ops exist for half and float: no bf16 group of ORT's name (bf16 has GroupNormAny)."""
    assert {g.rsplit("_", 1)[1] for g in table.contracts if g.startswith("GroupNormTriton_")} == {"fp16", "fp32"}
    assert {g.rsplit("_", 1)[1] for g in table.contracts if g.startswith("GroupNormAny_")} == {"fp16", "fp32", "bf16"}


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_the_pass_group_has_every_point_of_the_silu_group(table, dtype):
    """ORT picks Pass for a GroupNorm without SiLU on the very shapes Silu serves: the same candidates."""
    def points(act):
        return {k.name.removeprefix(f"GroupNormTriton_{act}_{dtype}") for k in table.kernels
                if k.group == f"GroupNormTriton_{act}_{dtype}"}

    assert points("Pass") == points("Silu") and len(points("Pass")) > 8


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_orts_rules_find_a_kernel_for_every_group_size_ort_takes(table, dtype):
    """1 to 128 channels per group, any H*W: ORT's own rules always find a candidate."""
    for cpg in range(1, 129):
        for hw in (1, 7, 16, 48, 49, 64 * 64, 97 * 97):
            assert admitted(table, f"GroupNormTriton_Pass_{dtype}", n=2, hw=hw, c=32 * cpg, groups=32,
                            c_per_group=cpg, silu=0), (cpg, hw)


@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
def test_small_unet_levels_have_a_one_step_kernel_in_orts_group(table, dtype):
    """8x8 and 16x16 at every width, 32x32 at 320 channels: ORT's own rules find a kernel whose one step
    covers the image, so the group is read once."""
    for n, h, c in UNET:
        if h > 16 and (h, c) != (32, 320):
            continue
        ks = admitted(table, f"GroupNormTriton_Silu_{dtype}", n=n, hw=h * h, c=c, groups=32, c_per_group=c // 32,
                      silu=1)
        assert any(k.constants["TILES"] * k.constants["HW_SIZE"] >= h * h for k in ks), (n, h, c)


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
def test_any_takes_every_shape_up_to_512_channels_per_group(table, dtype):
    group = f"GroupNormAny_Silu_{dtype}"
    assert table.contracts[group]["fallback"] is True
    assert all(":" not in k.sig_string() for k in table.kernels if k.group == group)
    for hw in (1, 7, 49, 4096):
        for cpg in (1, 3, 10, 129, 512):
            assert admitted(table, group, n=1, hw=hw, c=7 * cpg, groups=7, c_per_group=cpg, silu=1), (hw, cpg)
    assert not admitted(table, group, n=1, hw=49, c=513, groups=1, c_per_group=513, silu=1)
    assert not admitted(table, group, n=1, hw=49, c=64, groups=4, c_per_group=16, silu=0)  # the other activation
