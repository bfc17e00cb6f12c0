"""The thread-block cluster families: CUDA sm_90+ only, clusters that divide the grid and stay within the
programs an sm_90 device launches (8 portable, 16 with the function's leave). GroupNorm: ORT's arguments,
a cluster of PARTS programs (at most 8) per (image, group), the shapes of the cooperative teams.
Softmax: a cluster of SPLIT programs per row, rows up to 512K columns."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from pipeline.contracts import evaluate  # noqa: E402
from pipeline.table import load_table  # noqa: E402
from pipeline.targets import parse_target  # noqa: E402


@pytest.fixture(scope="module")
def table(root):
    return load_table([root / "kernels" / "group_norm_cluster_triton.py"])


@pytest.fixture(scope="module")
def softmax_table(root):
    return load_table([root / "kernels" / "softmax_cluster_triton.py"])


@pytest.mark.parametrize("script", ["group_norm_cluster_triton.py", "softmax_cluster_triton.py"])
def test_cuda_sm90_only(root, script):
    table = load_table([root / "kernels" / script])
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


def test_softmax_clusters_divide_the_grid(softmax_table):
    assert sorted(softmax_table.contracts) == sorted(f"{op}_cluster_{dt}" for op in ("softmax", "log_softmax")
                                                     for dt in ("fp32", "fp16", "bf16"))
    for k in softmax_table.kernels:
        contract = softmax_table.contracts[k.group]
        assert "workspace" not in contract and not contract.get("cooperative"), k.name
        assert contract["params"] == ["out", "in", "in_stride", "out_stride", "n_cols"], k.name
        scope = {**k.constants, "batch": 7}
        grid = [evaluate(g, scope) for g in contract["grid"]]
        cluster = [evaluate(d, scope) for d in contract["cluster"]]
        assert grid == [7 * k.constants["SPLIT"], 1, 1] and cluster == [k.constants["SPLIT"], 1, 1], k.name
        assert k.constants["SPLIT"] <= 16 and k.constants["LOG"] == int(k.group.startswith("log_")), k.name


def _admits(table, k, n_cols, stride=None):
    requires = table.contracts[k.group]["requires"]
    scope = {**k.constants, "batch": 3, "n_cols": n_cols, "in_stride": stride or n_cols,
             "out_stride": stride or n_cols}
    return all(evaluate(r, scope) for r in requires)


def test_softmax_members_fill_their_pieces(softmax_table):
    """A row fills more than half its cluster's pieces, in 16-element steps (16-byte vectors)."""
    k = next(k for k in softmax_table.kernels if k.name == "softmax_cluster_fp16_b32768_s4_w8")
    assert _admits(softmax_table, k, 131072) and _admits(softmax_table, k, 65552)
    assert _admits(softmax_table, k, 131056, stride=131072)  # padded rows
    assert not _admits(softmax_table, k, 131088)  # one vector past the pieces
    assert not _admits(softmax_table, k, 65536)  # half: the cluster of 2 takes it
    assert not _admits(softmax_table, k, 100008)  # not a multiple of 16
    assert not _admits(softmax_table, k, 100000, stride=100008)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_softmax_clusters_cover_long_rows(softmax_table, dtype):
    """Every 16-aligned row from 16K to 512K columns has a cluster kernel, of each op."""
    for op in ("softmax", "log_softmax"):
        kernels = [k for k in softmax_table.kernels if k.group == f"{op}_cluster_{dtype}"]
        for n in range(16384 + 16, 524288 + 1, 4096 - 16):
            assert any(_admits(softmax_table, k, n) for k in kernels), (op, dtype, n)
        assert not any(_admits(softmax_table, k, 524288 + 16) for k in kernels), (op, dtype)
