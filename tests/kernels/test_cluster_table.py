"""The cluster-team GroupNorm family: CUDA sm_90+ only, ORT's arguments, a cluster of PARTS programs per
(image, group) that covers the grid, and the shapes of the cooperative teams up to the portable 8."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from pipeline.contracts import evaluate  # noqa: E402
from pipeline.table import load_table  # noqa: E402
from pipeline.targets import parse_target  # noqa: E402


@pytest.fixture(scope="module")
def table(root):
    return load_table([root / "kernels" / "group_norm_cluster_triton.py"])


def test_cuda_sm90_only(table):
    assert {(k.platforms, k.min_sm) for k in table.kernels} == {(("cuda",), 90)}
    k = table.kernels[0]
    assert k.builds_for(parse_target("sm_90")) and not k.builds_for(parse_target("sm_80"))
    assert not k.builds_for(parse_target("gfx942"))


def test_clusters_divide_the_grid_and_stay_portable(table):
    assert sorted(table.contracts) == sorted(f"GroupNormCluster_{a}_{dt}" for a in ("Silu", "Pass")
                                             for dt in ("fp32", "fp16", "bf16"))
    for k in table.kernels:
        contract = table.contracts[k.group]
        assert "workspace" not in contract and not contract.get("cooperative"), k.name
        scope = {**k.constants, "n": 2, "groups": 32}
        grid = [evaluate(g, scope) for g in contract["grid"]]
        cluster = [evaluate(d, scope) for d in contract["cluster"]]
        assert all(g % d == 0 for g, d in zip(grid, cluster)), k.name
        assert cluster[0] * cluster[1] * cluster[2] == k.constants["PARTS"] <= 8, k.name


def test_members_hold_their_pixels(table):
    """A member holds cdiv(hw, PARTS) pixels of a group, filling more than half its tile."""
    k = next(k for k in table.kernels if k.name == "GroupNormCluster_Silu_fp16_p8_v4_e1024_w4")  # 256 vectors
    requires = table.contracts[k.group]["requires"]
    admits = lambda **p: all(evaluate(r, {**p, **k.constants, "silu": 1}) for r in requires)
    assert admits(hw=256, c_per_group=20)  # 32 pixels x 5 vectors = 160 of 256
    assert admits(hw=250, c_per_group=20)  # the last member holds 26 pixels
    assert not admits(hw=256, c_per_group=40)  # 32 pixels x 10 vectors: more than the tile
    assert not admits(hw=64, c_per_group=20)  # 8 pixels x 5 vectors: under half of it
    assert not admits(hw=256, c_per_group=18)  # channels that no VEC-wide vector divides
