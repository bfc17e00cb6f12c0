"""Bias concat: tiles of rows across the streams' boundary, and the interpreter against float64."""

from __future__ import annotations

from .conftest import admitted, grid


def test_groups_contract_and_signature(table):
    assert sorted(table.contracts) == sorted(f"bias_concat_{dt}" for dt in ("fp32", "fp16", "bf16"))
    for k in table.kernels:
        assert table.contracts[k.group]["params"] == ["out", "in", "in_b", "bias", "bias_b", "batch", "n_cols",
                                                      "seq_a", "seq_b"]


def test_the_dits_widths_have_tiles_and_the_grid_covers_them(table):
    for c in (1152, 1536, 3072):
        ks = admitted(table, "bias_concat_fp16", batch=2 * 4429, n_cols=c)
        assert ks
        for k in ks:
            gx, gy, _ = grid(table, k, batch=2 * 4429, n_cols=c)
            assert gx * k.constants["BLOCK_R"] >= 2 * 4429 and gy * k.constants["BLOCK_C"] >= c
    assert [k.constants["BLOCK_C"] for k in admitted(table, "bias_concat_fp16", batch=8, n_cols=40)] == [128]


def test_every_group_matches_float64_in_the_interpreter(table):
    from tritonforge.pipeline.builds.numerics_check import run_specs, select

    kernels, skipped = select(table)
    assert not skipped and len(kernels) == 3
    result = run_specs(kernels)
    assert result["passed"] and not [c for c in result["checked"] if c["error"]], result["checked"]
