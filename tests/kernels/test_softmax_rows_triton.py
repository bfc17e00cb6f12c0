"""Several aligned rows per program: ORT's arguments plus the row count, rows up to 16384 columns."""

from __future__ import annotations

from .conftest import admits, admitted, grid


def test_groups_contract_and_aligned_signature(table):
    assert sorted(table.contracts) == sorted(f"{op}_rows_{dt}" for op in ("softmax", "log_softmax")
                                             for dt in ("fp32", "fp16", "bf16"))
    for k in table.kernels:
        assert table.contracts[k.group]["params"] == ["out", "in", "in_stride", "out_stride", "n_cols", "batch"]
        assert k.sig_string().startswith(f"*{k.group.rsplit('_', 1)[1]}:16,"), k.name  # 16-byte vectors


def test_every_aligned_row_up_to_16k_has_a_kernel(table):
    for n in range(64, 16384 + 1, 48):
        assert admitted(table, "softmax_rows_fp16", n_cols=n, in_stride=n, out_stride=n, batch=5), n
    assert not admitted(table, "softmax_rows_fp16", n_cols=16400, in_stride=16400, out_stride=16400, batch=5)
    assert not admitted(table, "softmax_rows_fp16", n_cols=1000, in_stride=1000, out_stride=1000, batch=5)
    assert not admitted(table, "softmax_rows_fp16", n_cols=1024, in_stride=1032, out_stride=1024, batch=5)


def test_a_program_owns_rows_rows(table):
    k = next(k for k in table.kernels if k.constants["ROWS"] == 8)
    assert admits(table, k, n_cols=64, in_stride=64, out_stride=64, batch=17)
    assert grid(table, k, batch=17) == [3, 1, 1]


def test_log_softmax_keeps_the_one_row_shapes(table):
    log = [k for k in table.kernels if k.group.startswith("log_")]
    assert log and all(k.constants["ROWS"] == 1 for k in log)
    assert {k.constants["BLOCK_SIZE"] for k in log} == {1024, 2048, 4096, 8192, 16384}
