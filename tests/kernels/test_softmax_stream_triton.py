"""Rows streamed twice through one program: aligned long rows, and the fallback that takes every row."""

from __future__ import annotations

import pytest

from .conftest import admits, admitted, grid


def test_stream_takes_aligned_rows_past_its_block(table):
    for k in (k for k in table.kernels if k.group == "softmax_stream_bf16"):
        block = k.constants["BLOCK_SIZE"]
        ok = lambda n, stride=None, k=k: admits(table, k, n_cols=n, in_stride=stride or n, out_stride=stride or n,
                                                batch=3)
        assert not ok(block)  # rows that fit a block are the held kernels' job
        for n in (block + 16, 3 * block - 48, 1 << 20):  # any length past the block: a partial last chunk
            assert ok(n), (k.name, n)
        assert not ok(block + 8) and not ok(block + 16, stride=block + 24)
        assert grid(table, k, batch=5) == [5, 1, 1]
    assert not table.contracts["softmax_stream_fp32"].get("fallback")


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_any_takes_every_row(table, dtype):
    """The fallback: any length, stride and alignment, and it says it is the fallback."""
    for op in ("softmax", "log_softmax"):
        group = f"{op}_any_{dtype}"
        assert table.contracts[group]["fallback"] is True
        assert all(":" not in k.sig_string() for k in table.kernels if k.group == group)  # no alignment hints
        for n, stride in ((1, 1), (17, 33), (1000, 1003), (16385, 16385), (300007, 300011)):
            assert admitted(table, group, n_cols=n, in_stride=stride, out_stride=stride, batch=2), (group, n)
