"""Rows streamed twice through one program: every row in ORT's own groups (BLOCK_SIZE is the longest row
they take, CHUNK the piece), and the fallback that takes every row at any alignment."""

from __future__ import annotations

import re

import pytest
from tritonforge.pipeline.scripts.table import load_table

from .conftest import admits, admitted, grid, ptx


@pytest.fixture(scope="module")
def with_orts(root):
    """This script with softmax_triton.py, which declares the contract of ORT's groups."""
    return load_table([root / "kernels/softmax_stream_triton.py", root / "kernels/softmax_triton.py"])


def test_streamed_kernels_take_every_row_in_orts_groups(with_orts):
    streamed = [k for k in with_orts.kernels if "_stream_" in k.name]
    assert {k.group for k in streamed} == {f"{op}_{dt}" for op in ("softmax", "log_softmax")
                                           for dt in ("fp32", "fp16", "bf16")}
    for k in streamed:
        width = {"fp32": 4, "fp16": 2, "bf16": 2}[k.group.rsplit("_", 1)[1]]
        assert k.constants["BLOCK_SIZE"] == 1 << 30 and k.constants["CHUNK"] * width in (16384, 32768, 65536)
        assert k.sig_string().endswith(",i32,i32,i32")  # ORT's struct: no promise about n_cols or strides
        for n, stride in ((1, 1), (1000, 1003), (k.constants["CHUNK"] + 16, 9000), (300007, 300011)):
            assert admits(with_orts, k, n_cols=n, in_stride=stride, out_stride=stride, batch=2), (k.name, n)
        assert grid(with_orts, k, batch=5) == [5, 1, 1]


def test_aligned_rows_stream_as_16_byte_vectors(with_orts):
    k = next(k for k in with_orts.kernels if k.name == "softmax_stream_fp16_c8192_w8")
    text = ptx(k)
    assert re.search(r"ld\.global[\w:.]*\.v4\.b32", text) and re.search(r"ld\.global[\w:.]*\.b16\s", text)


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_any_takes_every_row(table, dtype):
    """The fallback: any length, stride and alignment, and it says it is the fallback."""
    for op in ("softmax", "log_softmax"):
        group = f"{op}_any_{dtype}"
        assert table.contracts[group]["fallback"] is True
        assert all(":" not in k.sig_string() for k in table.kernels if k.group == group)  # no alignment hints
        for n, stride in ((1, 1), (17, 33), (1000, 1003), (16385, 16385), (300007, 300011)):
            assert admitted(table, group, n_cols=n, in_stride=stride, out_stride=stride, batch=2), (group, n)


def test_streamed_rows_match_float64_on_both_paths(root, with_orts):
    """Under Triton's interpreter: rows that are whole 16-byte vectors, and rows of odd length whose
    body moves as vectors with a head and a tail of elements (each row of a contiguous tensor starts at
    another offset), several pieces long and shorter than one vector."""
    from tritonforge.pipeline.builds import numerics_check

    specs = []
    for k in with_orts.kernels:
        if "_stream_" not in k.name or k.constants["CHUNK"] * (4 if "fp32" in k.name else 2) != 16384:
            continue
        chunk = k.constants["CHUNK"]
        for n_cols in (2 * chunk + 16, 2 * chunk + 5, 5):
            specs.append({"script": k.script, "name": k.name, "group": k.group, "constants": k.constants,
                          "num_warps": k.num_warps, "contract": with_orts.contracts[k.group],
                          "problem": {"batch": 3, "n_cols": n_cols, "in_stride": n_cols, "out_stride": n_cols}})
    assert len(specs) == 3 * 2 * 3  # three dtypes, softmax and log-softmax, three rows
    result = numerics_check.run_specs(specs, timeout=600)
    failed = [f"{c['name']} {c['problem']}: {c['error']}" for c in result["checked"] if c["error"]]
    assert not failed and len(result["checked"]) == len(specs), "\n".join(failed)
