"""Rows held by a thread-block cluster: CUDA sm_90+ only, clusters that divide the grid and stay within
what an H100/H200 launches (16 with the function's leave), rows of 16K to 256K columns."""

from __future__ import annotations

import pytest
from tritonforge.pipeline.compile.targets import parse_target
from tritonforge.runtime.expressions import evaluate

from .conftest import admits, grid, scope


def test_cuda_sm90_only(table):
    assert {(k.platforms, k.min_sm) for k in table.kernels} == {(("cuda",), 90)}
    k = table.kernels[0]
    assert k.builds_for(parse_target("sm_90")) and not k.builds_for(parse_target("sm_80"))
    assert not k.builds_for(parse_target("gfx942"))


def test_clusters_divide_the_grid(table):
    assert sorted(table.contracts) == sorted(f"{op}_cluster_{dt}" for op in ("softmax", "log_softmax")
                                             for dt in ("fp32", "fp16", "bf16"))
    for k in table.kernels:
        contract = table.contracts[k.group]
        assert "workspace" not in contract and not contract.get("cooperative"), k.name
        assert contract["params"] == ["out", "in", "in_stride", "out_stride", "n_cols"], k.name
        cluster = [evaluate(d, scope(k, batch=7)) for d in contract["cluster"]]
        assert grid(table, k, batch=7) == [7 * k.constants["SPLIT"], 1, 1], k.name
        assert cluster == [k.constants["SPLIT"], 1, 1] and k.constants["SPLIT"] <= 16, k.name
        assert k.constants["LOG"] == int(k.group.startswith("log_")), k.name


def test_members_fill_their_pieces(table):
    """A row fills more than half its cluster's pieces, in 16-element steps (16-byte vectors)."""
    k = next(k for k in table.kernels if k.name == "softmax_cluster_fp16_b32768_s4_w8")
    ok = lambda n, stride=None: admits(table, k, batch=3, n_cols=n, in_stride=stride or n, out_stride=stride or n)
    assert ok(131072) and ok(65552) and ok(131056, stride=131072)  # padded rows too
    assert not ok(131088)  # one vector past the pieces
    assert not ok(65536)  # half: a smaller cluster takes it
    assert not ok(100008) and not ok(100000, stride=100008)  # not a multiple of 16


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_clusters_cover_long_rows(table, dtype):
    """Every 16-aligned row from 16K to 256K columns has a cluster kernel, of each op."""
    for op in ("softmax", "log_softmax"):
        kernels = [k for k in table.kernels if k.group == f"{op}_cluster_{dtype}"]
        for n in range(16384 + 16, 262144 + 1, 4096 - 16):
            assert any(admits(table, k, batch=3, n_cols=n, in_stride=n, out_stride=n) for k in kernels), (op, n)
