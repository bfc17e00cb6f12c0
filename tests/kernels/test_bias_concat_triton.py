"""Bias concat: tiles of rows across the streams' boundary, and the interpreter against float64."""

from __future__ import annotations

from .conftest import admitted, global_accesses, grid, matched_in_interpreter


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
    # whole-vector kernels only where the width is a multiple of 16
    assert any(k.constants["V16"] for k in admitted(table, "bias_concat_fp16", batch=8, n_cols=1536))
    assert not any(k.constants["V16"] for k in admitted(table, "bias_concat_fp16", batch=8, n_cols=1540))


def test_every_group_matches_float64_in_the_interpreter(table):
    assert len(matched_in_interpreter(table)) == 3


def test_a_v16_kernel_moves_whole_16_byte_vectors(table):
    """sm_90 PTX: without V16 each access is one element (the width may be any number), with it a 16-byte
    vector."""
    assert global_accesses(table, "bias_concat_fp16_r4_c1024_w4") == {"ld.global.b16", "st.global.b16"}
    assert global_accesses(table, "bias_concat_fp16_r4_c1024_w4_v16") == {"ld.global.v4.b32", "st.global.v4.b32"}
