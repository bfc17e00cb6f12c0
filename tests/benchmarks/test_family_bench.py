"""family_bench: which part of a kernel name is its family (sizes out, switches kept)."""

import argparse

import pytest

from benchmarks.family_bench import best_per_family, family, group_norm_shapes


def test_sizes_are_dropped_and_switches_kept():
    assert family("softmax_split_fp16_b8192_s8_w8") == "softmax_split_fp16"
    assert family("GroupNormSplit_Silu_fp16_c32_t128_w4_l2") == "GroupNormSplit_Silu_fp16_l2"
    assert family("GroupNormTriton_Silu_bf16_b32_hw256_w8_keep") == "GroupNormTriton_Silu_bf16_keep"
    assert family("GroupNormWhole_Silu_fp16_v8_e10240_w16") == "GroupNormWhole_Silu_fp16_v8"
    assert family("softmax_fp16_2048_w4") == "softmax_fp16_2048"  # ORT's names: no size prefix, kept


def test_best_of_each_family_fastest_first():
    timed = {"GroupNormWhole_Silu_fp16_v8_e4096_w8": 3.0, "GroupNormWhole_Silu_fp16_v8_e4096_w4": 2.0,
             "GroupNormWhole_Silu_fp16_v4_e4096_w8": 1.5, "GroupNormSplit_Silu_fp16_c32_t128_w4": 9.0}
    assert best_per_family(timed) == [(1.5, "GroupNormWhole_Silu_fp16_v4_e4096_w8"),
                                      (2.0, "GroupNormWhole_Silu_fp16_v8_e4096_w4"),
                                      (9.0, "GroupNormSplit_Silu_fp16_c32_t128_w4")]


def test_team_size_is_a_switch():
    assert family("GroupNormParts_Silu_fp16_p4_v8_e2560_w4") == "GroupNormParts_Silu_fp16_p4_v8"


def test_group_norm_shapes_parse_and_refuse():
    assert group_norm_shapes("2x16x640, 1x8x320") == [(2, 16, 640), (1, 8, 320)]
    for bad in ("2x16", "2x16x0", "ax16x640", "2x16x640x1"):
        with pytest.raises(argparse.ArgumentTypeError, match="NxHxC"):
            group_norm_shapes(bad)
