"""One program holds a whole (image, group) as VEC-channel vectors."""

from __future__ import annotations

import re

from .conftest import admits, grid, ptx


def test_vectors_are_one_16_byte_load_wide(table):
    for k in table.kernels:
        width = k.constants["VEC"] * (4 if k.group.endswith("fp32") else 2)
        assert width == 16, k.name


def test_a_group_fits_and_fills_more_than_half(table):
    k = next(k for k in table.kernels if k.group == "GroupNormWhole_Pass_fp16")  # 4096 values, VEC 8
    ok = lambda hw, cpg: admits(table, k, n=2, hw=hw, c=32 * cpg, groups=32, c_per_group=cpg, silu=0)
    assert ok(64, 40)  # 8x8 at 1280 channels: 2560 values
    assert not ok(64, 20)  # 1280 values: under half
    assert not ok(256, 20)  # 5120 values: more than the program holds
    assert not ok(64, 44) and not ok(64, 36)  # channels that VEC = 8 does not divide
    assert grid(table, k, n=2, groups=32) == [2, 32, 1]


def test_whole_kernels_load_whole_vectors(table):
    """The point of VEC: the fp16 kernel reads 16 bytes per load and never one element (PTX, no GPU)."""
    code = ptx(next(k for k in table.kernels if k.group == "GroupNormWhole_Pass_fp16"))
    assert "ld.global.v4.b32" in code and not re.search(r"ld\.global(\.\w+)*\.b16", code)
