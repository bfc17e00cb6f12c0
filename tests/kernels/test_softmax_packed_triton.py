"""Packed 16-bit rows held in registers: CUDA only, 16-bit types, in ORT's own groups with ORT's whole
contract (any row up to the block: aligned rows packed, the others on the plain path), rows up to 64K."""

from __future__ import annotations

import re

import pytest
from tritonforge.pipeline.scripts.table import load_table

from .conftest import admits, grid, ptx


@pytest.fixture(scope="module")
def with_orts(root):
    """This script with softmax_triton.py, which declares the contract of ORT's groups."""
    return load_table([root / "kernels/softmax_packed_triton.py", root / "kernels/softmax_triton.py"])


def test_cuda_only_sixteen_bit_and_register_capped(table):
    assert {k.platforms for k in table.kernels} == {("cuda",)}  # inline PTX
    assert {k.group for k in table.kernels} == {f"{op}_{dt}" for op in ("softmax", "log_softmax")
                                                for dt in ("fp16", "bf16")}
    for k in table.kernels:
        assert k.sig_string() == f"*{k.group[-4:]}:16,*{k.group[-4:]}:16,i32,i32,i32"  # ORT's struct
        # Each thread holds whole 16-byte vectors of the row.
        assert k.constants["BLOCK_SIZE"] % (2 * 8 * 32 * k.num_warps) == 0, k.name
        # Two programs per SM up to 32K columns (one loads while the other reduces); a 64K row fills one.
        # A larger budget (_r<maxnreg>: Triton 3.9's code spills at the plain one) still fits one program.
        larger = k.name.endswith(f"_r{k.options['maxnreg']}")
        programs = 2 if k.constants["BLOCK_SIZE"] <= 32768 and not larger else 1
        assert k.options["maxnreg"] * 32 * k.num_warps * programs <= 65536, k.name
        if larger:
            plain = next(p for p in table.kernels if p.name == k.name.rsplit("_r", 1)[0])
            assert plain.options["maxnreg"] < k.options["maxnreg"] and plain.constants == k.constants


def test_any_row_up_to_the_block_as_ort_launches(with_orts):
    k = max((k for k in with_orts.kernels if k.group == "softmax_fp16" and "_packed_" in k.name),
            key=lambda k: k.constants["BLOCK_SIZE"])
    n = k.constants["BLOCK_SIZE"]
    assert n == 65536
    assert admits(with_orts, k, n_cols=n, in_stride=n, out_stride=n, batch=3)
    assert admits(with_orts, k, n_cols=1000, in_stride=1000, out_stride=1000, batch=3)  # the plain path
    assert admits(with_orts, k, n_cols=1024, in_stride=1032, out_stride=1024, batch=3)
    assert not admits(with_orts, k, n_cols=n + 16, in_stride=n + 16, out_stride=n + 16, batch=3)
    assert grid(with_orts, k, batch=7) == [7, 1, 1]


def test_aligned_rows_move_as_16_byte_words_and_the_rest_as_elements(table):
    k = next(k for k in table.kernels if k.name == "softmax_packed_bf16_b16384_w8")
    text = ptx(k)
    assert re.search(r"ld\.global(\.\w+)*\.v4\.b32", text)  # the packed path: 4 words per load
    assert re.search(r"ld\.global(\.\w+)*\.b16", text)  # the plain path, for rows of any length
