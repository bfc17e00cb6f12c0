"""Large images split across a cooperative team per image: teams that fit the device, cache hints."""

from __future__ import annotations

from tritonforge.runtime.expressions import evaluate

from .conftest import UNET, admitted, grid, scope


def test_teams_fit_the_device(table):
    """A team per image and channel chunk; the grid never exceeds what is resident, however large the image."""
    contract = table.contracts["GroupNormSplit_Silu_fp16"]
    k = next(k for k in table.kernels if k.group == "GroupNormSplit_Silu_fp16" and k.constants["BLOCK_C"] == 64)
    problem = dict(n=2, hw=128 * 128, c=320, groups=32, c_per_group=10, silu=1)
    ok = lambda **kw: all(evaluate(r, scope(k, **{**problem, **kw})) for r in contract["requires"])
    assert ok(resident=1000)
    g = grid(table, k, **problem, resident=1000)
    assert g[1:] == [5, 2] and g[0] * g[1] * g[2] <= 1000 and g[0] == 1000 // 10
    assert grid(table, k, **{**problem, "hw": 64}, resident=1000)[0] == -(-64 // k.constants["TILE_HW"])
    assert not ok(resident=9)  # not even one program per (image, chunk)
    assert not ok(c=336, resident=1000)  # 64 does not divide 336
    assert not ok(groups=64, c_per_group=5, resident=1000)  # more groups than GROUPS_P
    lanes, groups_p = k.constants["LANES"], k.constants["GROUPS_P"]
    assert evaluate(contract["workspace"], scope(k, **problem)) == 4 * 2 * (32 + lanes * 2 * groups_p)


def test_one_tile_kernels_only_when_every_tile_is_resident(table):
    contract = table.contracts["GroupNormSplit_Silu_fp16"]
    k = next(k for k in table.kernels if k.group == "GroupNormSplit_Silu_fp16" and k.constants["ONE_TILE"])
    problem = dict(n=2, hw=64 * 64, c=320, groups=32, c_per_group=10, silu=1)
    tiles = 2 * (320 // k.constants["BLOCK_C"]) * -(-4096 // k.constants["TILE_HW"])
    ok = lambda resident: all(evaluate(r, scope(k, **problem, resident=resident)) for r in contract["requires"])
    assert ok(tiles) and not ok(tiles - 1)
    assert grid(table, k, **problem, resident=tiles) == [-(-4096 // k.constants["TILE_HW"]), 10, 2]


def test_every_unet_shape_has_candidates_with_and_without_cache_hints(table):
    for n, h, c in UNET:
        ks = admitted(table, "GroupNormSplit_Silu_fp16", n=n, hw=h * h, c=c, groups=32, c_per_group=c // 32,
                      silu=1, resident=10_000)
        assert any(k.constants["KEEP_IN_L2"] for k in ks) and any(not k.constants["KEEP_IN_L2"] for k in ks), (n, h)
    for k in table.kernels:
        assert k.name.endswith("_l2") == bool(k.constants["KEEP_IN_L2"]), k.name
        assert not (k.constants["KEEP_IN_L2"] and k.constants["ONE_TILE"]), k.name
