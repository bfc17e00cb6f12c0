"""The cooperative teams as thread-block clusters: CUDA sm_90+ only, a cluster of PARTS (at most 8)
programs per (image, group), the same shapes as group_norm_parts_triton.py."""

from __future__ import annotations

from tritonforge.pipeline.compile.targets import parse_target
from tritonforge.pipeline.scripts.table import load_table
from tritonforge.runtime.expressions import evaluate

from .conftest import admits, grid, scope


def test_cuda_sm90_only(table):
    assert {(k.platforms, k.min_sm) for k in table.kernels} == {(("cuda",), 90)}
    k = table.kernels[0]
    assert k.builds_for(parse_target("sm_90")) and not k.builds_for(parse_target("sm_80"))
    assert not k.builds_for(parse_target("gfx942"))


def test_clusters_divide_the_grid_and_stay_portable(table):
    for k in table.kernels:
        contract = table.contracts[k.group]
        assert "workspace" not in contract and not contract.get("cooperative"), k.name
        cluster = [evaluate(d, scope(k, n=2, groups=32)) for d in contract["cluster"]]
        assert all(g % d == 0 for g, d in zip(grid(table, k, n=2, groups=32), cluster)), k.name
        assert cluster[0] * cluster[1] * cluster[2] == k.constants["PARTS"] <= 8, k.name


def test_the_same_team_shapes_as_the_cooperative_teams(table, root):
    parts = load_table([root / "kernels" / "group_norm_parts_triton.py"])
    shape = lambda k: (k.group.split("_", 1)[1], tuple(sorted(k.constants.items())), k.num_warps)
    assert sorted(map(shape, table.kernels)) == sorted(map(shape, parts.kernels))


def test_members_hold_their_pixels(table):
    k = next(k for k in table.kernels if k.name == "GroupNormCluster_Silu_fp16_p8_v4_e1024_w4")  # 256 vectors
    ok = lambda hw, cpg: admits(table, k, n=2, hw=hw, c=32 * cpg, groups=32, c_per_group=cpg, silu=1)
    assert ok(256, 20) and ok(250, 20)
    assert not ok(256, 40) and not ok(64, 20) and not ok(256, 18)
