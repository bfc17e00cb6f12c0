"""The softmax function table keeps ORT's conventions and gives the tuner real choices."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from pipeline.table import load_table  # noqa: E402


@pytest.fixture(scope="module")
def table(root):
    return load_table([root / "kernels" / "softmax_triton.py"])


def test_ort_parity_names(table):
    names = {k.name for k in table.kernels}
    for dt in ("fp32", "fp16"):
        for block in (1024, 2048, 4096, 8192, 16384):
            assert f"softmax_{dt}_{block}" in names
    k = next(k for k in table.kernels if k.name == "softmax_fp16_4096")
    assert k.num_warps == 16 and k.constants["BLOCK_SIZE"] == 4096  # ORT's own choice for 4096
    assert k.sig_string() == "*fp16,*fp16,i32,i32,i32"


def test_groups_have_several_candidates_per_block(table):
    by_group = {}
    for k in table.kernels:
        by_group.setdefault(k.group, []).append(k)
    assert set(by_group) == {f"{op}_{dt}" for op in ("softmax", "log_softmax") for dt in ("fp32", "fp16", "bf16")}
    for group, ks in by_group.items():
        blocks = sorted({k.constants["BLOCK_SIZE"] for k in ks})
        assert blocks[0] <= 64 and blocks[-1] == 16384
        for b in blocks:
            assert len([k for k in ks if k.constants["BLOCK_SIZE"] == b]) >= 2, (group, b)
        assert all(k.constants["LOG"] == int(group.startswith("log_")) for k in ks)


def test_contract_is_orts(table):
    c = table.contracts["softmax_fp32"]
    assert c["params"] == ["out", "in", "in_stride", "out_stride", "n_cols"]
    assert c["grid"] == ["batch", "1", "1"] and c["requires"] == ["n_cols <= BLOCK_SIZE"]
