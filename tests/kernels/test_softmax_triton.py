"""ORT's softmax group: ORT's names, arguments and rule, and real choices for the tuner."""

from __future__ import annotations

from .conftest import admits, grid


def test_ort_parity_names(table):
    names = {k.name for k in table.kernels}
    for dt in ("fp32", "fp16", "bf16"):
        for block in (1024, 2048, 4096, 8192, 16384):
            assert f"softmax_{dt}_{block}" in names and f"log_softmax_{dt}_{block}" in names
    k = next(k for k in table.kernels if k.name == "softmax_fp16_4096")
    assert k.num_warps == 16 and k.constants["BLOCK_SIZE"] == 4096  # ORT's own choice for 4096
    assert k.sig_string() == "*fp16,*fp16,i32,i32,i32"


def test_softmax_has_choices_and_log_softmax_orts_alone(table):
    by_group = {}
    for k in table.kernels:
        by_group.setdefault(k.group, []).append(k)
    assert set(by_group) == {f"{op}_{dt}" for op in ("softmax", "log_softmax") for dt in ("fp32", "fp16", "bf16")}
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
