"""The GroupNorm benchmark's shape argument (CPU)."""

import argparse

import pytest

from benchmarks.group_norm_bench import group_norm_shapes


def test_group_norm_shapes_parse_and_refuse():
    assert group_norm_shapes("2x16x640, 1x8x320") == [(2, 16, 640), (1, 8, 320)]
    for bad in ("2x16", "2x16x0", "ax16x640", "2x16x640x1"):
        with pytest.raises(argparse.ArgumentTypeError, match="NxHxC"):
            group_norm_shapes(bad)
