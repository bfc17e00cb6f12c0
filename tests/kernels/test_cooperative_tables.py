"""The cooperative families (split-row softmax, tiled GroupNorm): what their tables and contracts promise."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("triton")

from pipeline.contracts import evaluate  # noqa: E402
from pipeline.table import load_table  # noqa: E402


@pytest.fixture(scope="module")
def table(root):
    return load_table([root / "kernels" / "softmax_split_triton.py", root / "kernels" / "group_norm_split_triton.py"])


def scope(kernel, **problem):
    return {**problem, **kernel.constants, "num_warps": kernel.num_warps}


def test_contracts_are_cooperative_with_a_workspace(table):
    assert len(table.contracts) == 18  # (softmax, log_softmax) x 3 dtypes + (Split, SplitAny) x (Silu, Pass) x 3
    for group, contract in table.contracts.items():
        assert contract["cooperative"] is True, group
        assert "ws" in contract["params"] and "resident" in contract["problem"], group


def test_split_softmax_covers_16k_to_1m_columns(table):
    contract = table.contracts["softmax_split_fp16"]
    kernels = [k for k in table.kernels if k.group == "softmax_split_fp16"]
    for n in (16400, 40000, 65536, 262144, 1 << 20):
        admitted = [k for k in kernels if all(evaluate(r, scope(k, n_cols=n, batch=8, in_stride=n, out_stride=n,
                                                                resident=1056)) for r in contract["requires"])]
        assert admitted, f"no split kernel for {n} columns"
        for k in admitted:  # every piece holds at least a quarter of its block: no team is mostly idle
            assert 4 * n > k.constants["SPLIT"] * k.constants["BLOCK_SIZE"] >= n
    k = kernels[0]
    assert not evaluate(contract["requires"][1], scope(k, n_cols=4096, batch=1, in_stride=4096, out_stride=4096,
                                                     resident=k.constants["SPLIT"] - 1))
    # The workspace holds a counter on its own 128-byte line and SPLIT (max, sum) pairs per row.
    assert evaluate(contract["workspace"], scope(k, batch=10)) == 4 * 10 * (32 + 2 * k.constants["SPLIT"])
    grid = [evaluate(g, scope(k, batch=1000, resident=100)) for g in contract["grid"]]
    assert grid[0] % k.constants["SPLIT"] == 0 and grid[0] <= 100  # whole teams, all resident


def test_tiled_group_norm_teams_fit_the_device(table):
    """A team per image and channel chunk; the grid never exceeds what is resident, however large the image."""
    contract = table.contracts["GroupNormSplit_Silu_fp16"]
    k = next(k for k in table.kernels if k.group == "GroupNormSplit_Silu_fp16" and k.constants["BLOCK_C"] == 64)
    problem = dict(n=2, hw=128 * 128, c=320, groups=32, c_per_group=10, silu=1)
    ok = lambda **kw: all(evaluate(r, scope(k, **{**problem, **kw})) for r in contract["requires"])
    assert ok(resident=1000)
    grid = [evaluate(g, scope(k, **problem, resident=1000)) for g in contract["grid"]]
    assert grid[1:] == [5, 2] and grid[0] * grid[1] * grid[2] <= 1000 and grid[0] == 1000 // 10
    small = [evaluate(g, scope(k, **{**problem, "hw": 64}, resident=1000)) for g in contract["grid"]]
    assert small[0] == -(-64 // k.constants["TILE_HW"])  # no member without a tile
    assert not ok(resident=9)  # not even one program per (image, chunk)
    assert not ok(c=336, resident=1000)  # 64 does not divide 336
    assert not ok(groups=64, c_per_group=5, resident=1000)  # more groups than GROUPS_P
    lanes, groups_p = k.constants["LANES"], k.constants["GROUPS_P"]
    assert evaluate(contract["workspace"], scope(k, **problem)) == 4 * 2 * (32 + lanes * 2 * groups_p)


def test_one_tile_group_norm_kernels_only_when_every_tile_is_resident(table):
    contract = table.contracts["GroupNormSplit_Silu_fp16"]
    k = next(k for k in table.kernels if k.group == "GroupNormSplit_Silu_fp16" and k.constants["ONE_TILE"]
             and k.constants["BLOCK_C"] == 32)
    problem = dict(n=2, hw=64 * 64, c=320, groups=32, c_per_group=10, silu=1)
    tiles = 2 * 10 * -(-4096 // k.constants["TILE_HW"])
    ok = lambda resident: all(evaluate(r, scope(k, **problem, resident=resident)) for r in contract["requires"])
    assert ok(tiles) and not ok(tiles - 1)
    grid = [evaluate(g, scope(k, **problem, resident=tiles)) for g in contract["grid"]]
    assert grid == [-(-4096 // k.constants["TILE_HW"]), 10, 2]  # a member per tile


def test_any_group_norm_kernels_take_what_the_aligned_ones_cannot(table):
    """GroupNormSplitAny: no divisibility hints, a masked last chunk; the aligned group needs BLOCK_C | c."""
    problem = dict(n=1, hw=49, c=24, groups=3, c_per_group=8, silu=1, resident=1000)
    admits = lambda k: all(evaluate(r, scope(k, **problem)) for r in table.contracts[k.group]["requires"])
    anys = [k for k in table.kernels if k.group == "GroupNormSplitAny_Silu_fp16"]
    assert anys and all(admits(k) for k in anys)
    assert ":16" not in anys[0].sig_string().replace("*i32:16", "")  # only the runtime's own workspace is aligned
    assert not any(admits(k) for k in table.kernels if k.group == "GroupNormSplit_Silu_fp16")
    k = next(k for k in anys if k.constants["BLOCK_C"] == 16)
    assert [evaluate(g, scope(k, **problem)) for g in table.contracts[k.group]["grid"]][1:] == [2, 1]


def test_scripts_import_helpers_next_to_them(tmp_path):
    """kernels/_grid_sync.py is imported as a sibling, as `python script.py` would; sys.path is restored."""
    (tmp_path / "_helper_for_test.py").write_text("import triton\n\n@triton.jit\ndef one():\n    return 1\n")
    script = tmp_path / "k_triton.py"
    script.write_text(
        "import triton\nimport triton.language as tl\nfrom _helper_for_test import one\n\n"
        "@triton.jit\ndef k(out_ptr):\n    tl.store(out_ptr, one())\n\n"
        "def get_function_table():\n"
        "    return [{'name': 'k', 'group': 'g', 'func': k, 'sig': '*i32',\n"
        "             'kwargs': {'num_warps': 1, 'constants': {}}}]\n")
    before = list(sys.path)
    assert [k.name for k in load_table([script]).kernels] == ["k"]
    assert sys.path == before
