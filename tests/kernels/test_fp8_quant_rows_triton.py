"""fp8 rows: the contract covers the DiTs' widths, the interpreter matches float64, and sm_90 converts in one
instruction per pair."""

from __future__ import annotations

from .conftest import admitted, grid, matched_in_interpreter, ptx


def test_groups_contract_and_signature(table):
    assert sorted(table.contracts) == ["fp8_quant_rows_bf16", "fp8_quant_rows_fp16"]
    for k in table.kernels:
        assert table.contracts[k.group]["params"] == ["out", "row_scale", "in", "batch", "n_cols"]


def test_the_dits_widths_have_kernels_and_the_grid_covers_every_row(table):
    for c in (1152, 1536, 3072, 6144, 12288):
        ks = admitted(table, "fp8_quant_rows_fp16", batch=2 * 4429, n_cols=c)
        assert ks
        for k in ks:
            assert grid(table, k, batch=2 * 4429, n_cols=c)[0] * k.constants["BLOCK_R"] >= 2 * 4429
    # a short row is not given a block mostly of masked lanes
    assert {k.constants["BLOCK_C"] for k in admitted(table, "fp8_quant_rows_fp16", batch=8, n_cols=40)} == {256}


def test_every_group_matches_float64_in_the_interpreter(table):
    assert len(matched_in_interpreter(table)) == 2


def test_sm90_converts_two_values_an_instruction_saturating(table):
    text = ptx(next(k for k in table.kernels if k.name == "fp8_quant_rows_fp16_r1_c1024_w4"))
    assert "cvt.rn.satfinite.e4m3x2.f32" in text
