"""Packed 16-bit rows held in registers: CUDA only, 16-bit types, ORT's arguments, rows up to 64K."""

from __future__ import annotations

from .conftest import admits, grid


def test_cuda_only_sixteen_bit_and_register_capped(table):
    assert {k.platforms for k in table.kernels} == {("cuda",)}  # inline PTX
    assert sorted(table.contracts) == sorted(f"{op}_packed_{dt}" for op in ("softmax", "log_softmax")
                                             for dt in ("fp16", "bf16"))
    for k in table.kernels:
        # Each thread holds whole 16-byte vectors of the row.
        assert k.constants["BLOCK_SIZE"] % (2 * 8 * 32 * k.num_warps) == 0, k.name
        # Two programs per SM up to 32K columns (one loads while the other reduces); a 64K row fills one.
        programs = 2 if k.constants["BLOCK_SIZE"] <= 32768 else 1
        assert k.options["maxnreg"] * 32 * k.num_warps * programs <= 65536, k.name


def test_rows_up_to_the_block_and_aligned_only(table):
    k = max((k for k in table.kernels if k.group == "softmax_packed_fp16"), key=lambda k: k.constants["BLOCK_SIZE"])
    n = k.constants["BLOCK_SIZE"]
    assert n == 65536
    assert admits(table, k, n_cols=n, in_stride=n, out_stride=n, batch=3)
    assert admits(table, k, n_cols=16, in_stride=32, out_stride=48, batch=3)
    assert not admits(table, k, n_cols=n + 16, in_stride=n + 16, out_stride=n + 16, batch=3)
    assert not admits(table, k, n_cols=1000, in_stride=1000, out_stride=1000, batch=3)  # odd vectors
    assert not admits(table, k, n_cols=1024, in_stride=1032, out_stride=1024, batch=3)  # misaligned rows
    assert grid(table, k, batch=7) == [7, 1, 1]
