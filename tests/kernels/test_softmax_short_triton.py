"""Short rows of any length, many per program: the rows the aligned kernels leave (77, 197 columns)."""

from __future__ import annotations

from .conftest import admitted, grid


def test_every_short_row_has_one_block_that_it_fills_more_than_half(table):
    for n in range(33, 513):
        for dt in ("fp16", "fp32"):
            blocks = {k.constants["BLOCK_SIZE"] for k in admitted(table, f"softmax_short_{dt}", n_cols=n,
                                                                    in_stride=n, out_stride=n, batch=9)}
            assert len(blocks) == 1 and n <= blocks.pop() < 2 * n, (n, dt)
    assert not admitted(table, "softmax_short_fp16", n_cols=513, in_stride=513, out_stride=513, batch=9)
    assert not admitted(table, "softmax_short_fp16", n_cols=32, in_stride=32, out_stride=32, batch=9)


def test_any_stride_and_many_rows_per_program(table):
    for k in table.kernels:
        assert ":16" not in k.sig_string().split(",", 2)[2], k.name  # strides and n_cols unspecialised
        assert k.constants["ROWS"] >= 2
    k = next(k for k in table.kernels if k.name == "softmax_short_fp16_b128_r16_w4")
    assert grid(table, k, batch=8192) == [512, 1, 1]
