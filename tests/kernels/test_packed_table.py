"""The packed-row softmax families: CUDA only, 16-bit types, ORT-style arguments; rows held in registers
(two programs per SM up to 32K columns, one at 64K) or, past the block, streamed twice."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from pipeline.contracts import evaluate  # noqa: E402
from pipeline.table import load_table  # noqa: E402


@pytest.fixture(scope="module")
def table(root):
    return load_table([root / "kernels" / "softmax_packed_triton.py"])


def admits(table, kernel, **problem):
    contract = table.contracts[kernel.group]
    scope = {**problem, **kernel.constants, "num_warps": kernel.num_warps}
    return all(evaluate(r, scope) for r in contract["requires"])


def test_cuda_only_sixteen_bit_and_register_capped(table):
    assert {k.platforms for k in table.kernels} == {("cuda",)}  # inline PTX
    assert sorted(table.contracts) == sorted(f"{op}_packed{kind}_{dt}" for op in ("softmax", "log_softmax")
                                             for kind in ("", "_online") for dt in ("fp16", "bf16"))
    for k in table.kernels:
        # Each thread holds whole 16-byte vectors of a row or chunk.
        assert k.constants["BLOCK_SIZE"] % (2 * 8 * 32 * k.num_warps) == 0, k.name
        if "_online_" in k.name:
            continue
        # Two programs per SM up to 32K columns (one loads while the other reduces); a 64K row fills one.
        programs = 2 if k.constants["BLOCK_SIZE"] <= 32768 else 1
        assert k.options["maxnreg"] * 32 * k.num_warps * programs <= 65536, k.name


def test_rows_up_to_the_block_and_aligned_only(table):
    k = max((k for k in table.kernels if k.group == "softmax_packed_fp16"), key=lambda k: k.constants["BLOCK_SIZE"])
    n = k.constants["BLOCK_SIZE"]
    assert admits(table, k, n_cols=n, in_stride=n, out_stride=n, batch=3)
    assert admits(table, k, n_cols=16, in_stride=32, out_stride=48, batch=3)
    assert not admits(table, k, n_cols=n + 16, in_stride=n + 16, out_stride=n + 16, batch=3)
    assert not admits(table, k, n_cols=1000, in_stride=1000, out_stride=1000, batch=3)  # odd vectors
    assert not admits(table, k, n_cols=1024, in_stride=1032, out_stride=1024, batch=3)  # misaligned rows
    grid = [evaluate(g, {"batch": 7}) for g in table.contracts[k.group]["grid"]]
    assert grid == [7, 1, 1]



def test_streamed_rows_are_longer_than_the_block_and_aligned(table):
    for k in (k for k in table.kernels if k.group == "log_softmax_packed_online_bf16"):
        block = k.constants["BLOCK_SIZE"]
        assert not admits(table, k, n_cols=block, in_stride=block, out_stride=block, batch=3)  # held rows' job
        for n in (block + 16, 3 * block - 48, 1 << 20):  # any length past the block: a partial last chunk
            assert admits(table, k, n_cols=n, in_stride=n, out_stride=n + 64, batch=3), (k.name, n)
        assert not admits(table, k, n_cols=block + 8, in_stride=block + 8, out_stride=block + 8, batch=3)
        assert [evaluate(g, {"batch": 5}) for g in table.contracts[k.group]["grid"]] == [5, 1, 1]
