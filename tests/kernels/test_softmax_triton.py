"""ORT's softmax group: ORT's names, arguments and rule, real choices for the tuner, and 16-byte vectors
for aligned rows chosen inside the kernel."""

from __future__ import annotations

import re

from .conftest import admits, grid, ptx


def test_ort_parity_names(table):
    names = {k.name for k in table.kernels}
    for dt in ("fp32", "fp16", "bf16", "fp64"):
        for block in (1024, 2048, 4096, 8192, 16384):
            assert f"softmax_{dt}_{block}" in names and f"log_softmax_{dt}_{block}" in names
    k = next(k for k in table.kernels if k.name == "softmax_fp16_4096")
    assert k.num_warps == 16 and k.constants["BLOCK_SIZE"] == 4096  # ORT's own choice for 4096
    assert k.sig_string() == "*fp16:16,*fp16:16,i32,i32,i32"  # ORT's struct; its tensors are 256-byte aligned


def test_softmax_has_choices_and_log_softmax_orts_alone(table):
    by_group = {}
    for k in table.kernels:
        by_group.setdefault(k.group, []).append(k)
    assert set(by_group) == {f"{op}_{dt}" for op in ("softmax", "log_softmax")
                              for dt in ("fp32", "fp16", "bf16", "fp64")}
    for group, ks in by_group.items():
        blocks = [k.constants["BLOCK_SIZE"] for k in ks]
        assert sorted(set(blocks)) == [32 << i for i in range(10)], group  # 32 to 16384: every row ORT can hold
        assert all(k.constants["LOG"] == int(group.startswith("log_")) for k in ks)
        if group.startswith("log_"):
            assert len(blocks) == len(set(blocks)) and all(k.name == f"{group}_{k.constants['BLOCK_SIZE']}" for k in ks)
        else:
            assert all(blocks.count(b) >= 2 for b in set(blocks)), group


def test_contract_is_orts(table):
    c = table.contracts["softmax_fp32"]
    assert c["params"] == ["out", "in", "in_stride", "out_stride", "n_cols"]
    assert c["grid"] == ["batch", "1", "1"] and c["requires"] == ["n_cols <= BLOCK_SIZE"]
    k = next(k for k in table.kernels if k.name == "softmax_fp32_1024")
    assert admits(table, k, n_cols=1000, batch=3) and not admits(table, k, n_cols=1025, batch=3)
    assert grid(table, k, batch=7) == [7, 1, 1]


def test_aligned_rows_take_16_byte_vectors_inside_the_kernel(table):
    """One kernel for any row: the branch for rows whose n_cols and strides are multiples of 16 bytes
    moves vectors, the other single elements (ORT's strides and widths are not known when it compiles)."""
    for name, vector, element in (("softmax_fp16_16384", r"v4\.b32", r"b16"), ("softmax_fp32_1024", r"v4\.b32", r"b32"),
                                  ("softmax_fp64_1024", r"v2\.b64", r"b64")):
        text = ptx(next(k for k in table.kernels if k.name == name))
        assert re.search(rf"ld\.global(\.\w+)*\.{vector}", text), name
        assert re.search(rf"ld\.global(\.\w+)*\.{element}\s", text), name
