"""Cooperative teams of programs per (image, group) that add up their sums in a workspace line."""

from __future__ import annotations

import re

from tritonforge.runtime.expressions import evaluate

from .conftest import admitted, grid, ptx, scope


def test_built_where_clusters_are_absent(table):
    from tritonforge.pipeline.compile.targets import parse_target

    k = table.kernels[0]
    assert k.builds_for(parse_target("sm_80")) and k.builds_for(parse_target("sm_89"))
    assert not k.builds_for(parse_target("sm_90")) and k.builds_for(parse_target("gfx942"))


def test_cooperative_with_a_line_per_team(table):
    for group, contract in table.contracts.items():
        assert contract["cooperative"] is True and "ws" in contract["params"], group
        assert "resident" in contract["problem"], group
    k = table.kernels[0]
    assert evaluate(table.contracts[k.group]["workspace"], scope(k, n=2, groups=32)) == 512 * 64


def test_members_hold_their_pixels(table):
    """A member holds cdiv(hw, PARTS) pixels of a group, filling more than half its tile."""
    k = next(k for k in table.kernels if k.name == "GroupNormParts_Silu_fp16_p8_v4_e1024_w4")  # 256 vectors
    ok = lambda hw, cpg, resident=10_000: not [r for r in table.contracts[k.group]["requires"] if not evaluate(
        r, scope(k, n=2, hw=hw, c=32 * cpg, groups=32, c_per_group=cpg, silu=1, resident=resident))]
    assert ok(256, 20) and ok(250, 20)  # the last member holds 26 pixels
    assert not ok(256, 40) and not ok(64, 20) and not ok(256, 18)
    assert not ok(256, 20, resident=2 * 32 * 8 - 1)  # every program of the grid resident, or none runs
    assert grid(table, k, n=2, groups=32) == [2, 32, 8]


def test_benchmark_shapes_of_16x16_and_32x32_have_teams(table):
    for n, h, c in ((2, 16, 640), (2, 16, 1280), (2, 32, 640), (2, 32, 1280), (1, 16, 640)):
        assert admitted(table, "GroupNormParts_Silu_bf16", n=n, hw=h * h, c=c, groups=32, c_per_group=c // 32,
                        silu=1, resident=10_000), (n, h, c)


def test_team_exchange_is_a_tagged_store_and_a_poll(table):
    """Members publish with plain 64-bit stores and poll with volatile loads; no fence, one atomic
    (counting out) and one exchange (resetting the counter) per member. PTX compiled here, no GPU."""
    code = ptx(next(k for k in table.kernels if k.group == "GroupNormParts_Silu_fp16" and k.constants["PARTS"] == 4))
    assert not re.search(r"\b(fence|membar)\.", code)
    assert re.search(r"st\.global(\.\w+)*\.b64", code) and re.search(r"ld\.volatile\.global(\.\w+)*\.b64", code)
    assert len(re.findall(r"\batom\.", code)) == 2
