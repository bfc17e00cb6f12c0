"""GroupNorm tables: what ORT's group and the tiled groups promise about their variants (no GPU)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("triton")

from pipeline.contracts import evaluate  # noqa: E402
from pipeline.table import load_table  # noqa: E402

UNET = [(n, h, c) for n in (1, 2) for h in (8, 16, 32, 64) for c in (320, 640, 1280)]


@pytest.fixture(scope="module")
def table(root):
    return load_table([root / "kernels" / name for name in
                       ("group_norm_triton.py", "group_norm_split_triton.py", "group_norm_whole_triton.py")])


def admitted(table, group, **problem):
    contract = table.contracts[group]
    out = []
    for k in table.kernels:
        if k.group != group:
            continue
        scope = {**problem, **k.constants, "num_warps": k.num_warps, "resident": 10_000}
        if all(evaluate(r, scope) for r in contract["requires"]):
            out.append(k)
    return out


def test_orts_group_keeps_orts_constants_and_names(table):
    """ORT's C++ reads BLOCK_SIZE and HW_SIZE with .at(); names become C symbols; constants are ints."""
    orts = [k for k in table.kernels if k.group.startswith("GroupNormTriton_")]
    assert orts
    for k in orts:
        assert {"BLOCK_SIZE", "HW_SIZE", "ACTIVATION_SILU", "KEEP_FIRST"} <= set(k.constants), k.name
        assert all(type(v) is int for v in k.constants.values()), k.name
        assert re.fullmatch(r"[A-Za-z0-9_]+", k.name), k.name
        assert k.name.endswith("_keep") == bool(k.constants["KEEP_FIRST"]), k.name


def test_keep_kernels_hold_at_most_32_values_per_thread(table):
    keep = [k for k in table.kernels if k.group == "GroupNormTriton_Silu_fp32" and k.constants["KEEP_FIRST"]]
    assert keep
    for k in keep:
        values = k.constants["BLOCK_SIZE"] * k.constants["HW_SIZE"]
        assert 2048 <= values <= 16384, k.name
        assert values // (32 * k.num_warps) <= 32, k.name  # fp32 values per thread


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
def test_small_unet_levels_have_a_whole_group_kernel_in_orts_group(table, dtype):
    """16x16, and 32x32 at 320 channels: some kernel ORT itself would pick reads each group once."""
    for n, h, c in UNET:
        block = 1 << (c // 32 - 1).bit_length()
        if h * h not in (256, 1024) or block * h * h > 16384:
            continue
        ks = admitted(table, f"GroupNormTriton_Silu_{dtype}", n=n, hw=h * h, c=c, groups=32, c_per_group=c // 32,
                      silu=1)
        assert any(k.constants["KEEP_FIRST"] and k.constants["HW_SIZE"] == h * h for k in ks), (n, h, c)


def test_l2_kernels_are_aligned_looped_kernels(table):
    l2 = [k for k in table.kernels if k.constants.get("KEEP_IN_L2")]
    assert l2 and all(k.name.endswith("_l2") for k in l2)
    for k in l2:
        assert k.group.startswith("GroupNormSplit_") and not k.constants["ONE_TILE"], k.name
    plain = {k.name for k in table.kernels if k.group.startswith("GroupNormSplit_") and not k.constants["ONE_TILE"]
             and not k.constants["KEEP_IN_L2"]}
    assert all(k.name.removesuffix("_l2") in plain for k in l2)  # the same tiles, with cache hints


def test_every_unet_shape_has_tiled_candidates(table):
    for n, h, c in UNET:
        ks = admitted(table, "GroupNormSplit_Silu_fp16", n=n, hw=h * h, c=c, groups=32, c_per_group=c // 32, silu=1)
        assert any(k.constants["KEEP_IN_L2"] for k in ks), (n, h, c)
        assert any(not k.constants["KEEP_IN_L2"] for k in ks), (n, h, c)


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
def test_small_unet_levels_have_whole_group_kernels_with_the_widest_vectors(table, dtype):
    """Up to 16x16 (32x32 at 320 and 640 channels) one program holds a group, read in the widest vectors that
    c_per_group and a 16-byte load allow; a group past every kernel is left to the tiled kernels."""
    widest = 4 if dtype == "fp32" else 8
    for n, h, c in UNET:
        cpg = c // 32
        ks = admitted(table, f"GroupNormWhole_Silu_{dtype}", n=n, hw=h * h, c=c, groups=32, c_per_group=cpg, silu=1)
        if h * h * cpg > 20480:
            assert not ks, (n, h, c)
            continue
        vec = max(v for v in (1, 2, 4, 8) if cpg % v == 0 and v <= widest)
        assert any(k.constants["VEC"] == vec for k in ks), (n, h, c)
        for k in ks:
            assert k.constants["VECTORS"] + k.constants["TAIL"] >= h * h * cpg // k.constants["VEC"], k.name
        # 5 * 2^k vectors: from 1280 values (the smallest body and tail), some kernel holds them with no
        # padding (VECTORS plus a quarter as TAIL).
        held = [(k.constants["VECTORS"] + k.constants["TAIL"]) * k.constants["VEC"] for k in ks]
        assert h * h * cpg < 1280 or h * h * cpg in held, (n, h, c)


def _ptx(k):
    import triton
    from triton.compiler import ASTSource

    from pipeline.compiler import triton_signature
    from pipeline.targets import parse_target

    sig, constexprs, attrs = triton_signature(k)
    src = ASTSource(fn=k.func, signature=sig, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=parse_target("cuda:sm_90").to_triton(), options=dict(k.options)).asm["ptx"]


def test_whole_kernels_load_whole_vectors(table):
    """The point of VEC: with c_per_group = 40 the fp16 VEC=8 kernel reads 16 bytes per load, the
    VEC=1 kernel of the same size 2 (PTX compiled here, no GPU)."""
    def ptx(vec):
        return _ptx(next(k for k in table.kernels if k.group == "GroupNormWhole_Pass_fp16" and k.constants["VEC"] == vec
                         and k.constants["VECTORS"] * vec == 4096 and not k.constants["TAIL"]))

    wide, narrow = ptx(8), ptx(1)
    assert "ld.global.v4.b32" in wide and not re.search(r"ld\.global(\.\w+)*\.b16", wide)
    assert re.search(r"ld\.global(\.\w+)*\.b16", narrow)


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
def test_middle_unet_levels_have_team_kernels_of_every_size(table, dtype):
    """Wherever a member's share, cdiv(H*W, PARTS) pixels, is 513 to 5120 values, a team of that many
    programs is a candidate, on grid (n, groups, PARTS), with the widest vector VEC <= 4 that divides
    c_per_group; its members hold between half and all of their capacity."""
    for n, h, c in UNET:
        cpg = c // 32
        ks = admitted(table, f"GroupNormParts_Silu_{dtype}", n=n, hw=h * h, c=c, groups=32, c_per_group=cpg, silu=1)
        vec = max(v for v in (2, 4) if cpg % v == 0)
        for parts in (2, 4, 8, 16):
            share = -(-h * h // parts) * cpg
            team = [k for k in ks if k.constants["PARTS"] == parts and k.constants["VEC"] == vec]
            assert bool(team) == (512 < share <= 5120), (n, h, c, parts, [k.name for k in team])
            for k in team:
                held = (k.constants["VECTORS"] + k.constants["TAIL"]) * vec
                assert held // 2 < share <= held, k.name
                grid = [evaluate(g, {"n": n, "groups": 32, **k.constants})
                        for g in table.contracts[k.group]["grid"]]
                assert grid == [n, 32, parts], k.name


@pytest.mark.parametrize("dtype", ["fp16", "fp32", "bf16"])
def test_small_unet_levels_have_spread_teams(table, dtype):
    """Teams with no exchange: wherever a member's share is more than 256 values and at most what PARTS
    members can read whole (5120 values for 2 and 4 members, 2560 for 8: at most 16K values plus the
    tail per program), a team of that size is a candidate on grid (n, groups, PARTS), plain launch."""
    assert not table.contracts[f"GroupNormSpread_Silu_{dtype}"].get("cooperative")
    assert "workspace" not in table.contracts[f"GroupNormSpread_Silu_{dtype}"]
    for n, h, c in UNET:
        cpg = c // 32
        ks = admitted(table, f"GroupNormSpread_Silu_{dtype}", n=n, hw=h * h, c=c, groups=32, c_per_group=cpg, silu=1)
        vec = max(v for v in (2, 4) if cpg % v == 0)
        for parts, most in ((2, 5120), (4, 5120), (8, 2560)):
            share = -(-h * h // parts) * cpg
            team = [k for k in ks if k.constants["PARTS"] == parts and k.constants["VEC"] == vec]
            assert bool(team) == (256 < share <= most), (n, h, c, parts, [k.name for k in team])
            for k in team:
                held = (k.constants["VECTORS"] + k.constants["TAIL"]) * vec
                assert held // 2 < share <= held, k.name
                assert parts * held <= 20480, k.name
                grid = [evaluate(g, {"n": n, "groups": 32, **k.constants})
                        for g in table.contracts[k.group]["grid"]]
                assert grid == [n, 32, parts], k.name


def test_spread_team_members_share_nothing(table):
    """A spread member neither waits nor publishes: no atomics, no volatile loads, no fences, and its
    loads are 8-byte vectors (VEC 4 of fp16). PTX compiled here, no GPU."""
    k = next(k for k in table.kernels if k.group == "GroupNormSpread_Silu_fp16" and k.constants["PARTS"] == 4
             and k.constants["VEC"] == 4)
    ptx = _ptx(k)
    assert not re.search(r"\b(atom|fence|membar)\.|ld\.volatile", ptx)
    assert re.search(r"ld\.global(\.\w+)*\.v2\.b32", ptx)


def test_team_exchange_is_a_tagged_store_and_a_poll(table):
    """What makes a team pay off (H200: about 1 us against 2 us for a counter with fences): members
    publish with plain 64-bit stores and poll with volatile loads; no fence, one atomic (counting out)
    and one exchange (resetting the counter) per member. PTX compiled here, no GPU."""
    ptx = _ptx(next(k for k in table.kernels if k.group == "GroupNormParts_Silu_fp16" and k.constants["PARTS"] == 4))
    assert not re.search(r"\b(fence|membar)\.", ptx)
    assert re.search(r"st\.global(\.\w+)*\.b64", ptx)
    assert re.search(r"ld\.volatile\.global(\.\w+)*\.b64", ptx)
    assert len(re.findall(r"\batom\.", ptx)) == 2
