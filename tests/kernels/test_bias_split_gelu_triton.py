"""Bias split GELU: tiles of the output over both halves of the input, and the interpreter against float64."""

from __future__ import annotations

from .conftest import admitted, global_accesses, grid, matched_in_interpreter


def test_groups_contract_and_signature(table):
    assert sorted(table.contracts) == sorted(f"bias_split_gelu_{dt}" for dt in ("fp32", "fp16", "bf16"))
    for k in table.kernels:
        assert table.contracts[k.group]["params"] == ["out", "in", "bias", "batch", "n_cols"]


def test_the_unets_widths_have_tiles_and_the_grid_covers_them(table):
    for half in (1280, 2560, 5120):  # SD 1.5's and SDXL's GEGLU inner widths
        ks = admitted(table, "bias_split_gelu_fp16", batch=2 * 4096, n_cols=half)
        assert ks and any(k.constants["V16"] for k in ks)
        for k in ks:
            gx, gy, _ = grid(table, k, batch=2 * 4096, n_cols=half)
            assert gx * k.constants["BLOCK_R"] >= 2 * 4096 and gy * k.constants["BLOCK_C"] >= half
    assert [k.constants["BLOCK_C"] for k in admitted(table, "bias_split_gelu_fp16", batch=8, n_cols=40)] == [128]
    assert not any(k.constants["V16"] for k in admitted(table, "bias_split_gelu_fp16", batch=8, n_cols=1288 + 4))


def test_every_group_matches_float64_in_the_interpreter(table):
    assert len(matched_in_interpreter(table)) == 3


def test_a_v16_kernel_moves_whole_16_byte_vectors(table):
    """sm_90 PTX: without V16 each access is one element (the width may be any number), with it a 16-byte
    vector."""
    assert global_accesses(table, "bias_split_gelu_fp16_r4_c1024_w4") == {"ld.global.b16", "st.global.b16"}
    assert global_accesses(table, "bias_split_gelu_fp16_r4_c1024_w4_v16") == {"ld.global.v4.b32", "st.global.v4.b32"}
