"""AdaLN: one row per program, the smallest block that holds the row, and the interpreter against float64."""

from __future__ import annotations

from .conftest import admitted, global_accesses, grid, matched_in_interpreter


def test_groups_contract_and_signature(table):
    assert sorted(table.contracts) == sorted(f"ada_layer_norm{g}_{dt}" for g in ("", "_gated", "_gated_bias")
                                             for dt in ("fp32", "fp16", "bf16"))
    for k in table.kernels:
        assert table.contracts[k.group]["params"][:8] == ["out", "in", "mod_scale", "mod_shift", "skip", "gate",
                                                          "add_out", "bias"]
        assert k.constants["GATED"] == ("_gated" in k.group) + ("_bias" in k.group)


def test_each_width_of_the_dits_has_one_block_size(table):
    for c in (77, 1152, 1536, 3072, 4096, 8192):
        blocks = {k.constants["BLOCK_SIZE"] for k in admitted(table, "ada_layer_norm_fp16", batch=8192, n_cols=c)}
        assert len(blocks) == 1 and c <= blocks.pop() < max(2 * c, 257), c
    # whole-vector kernels where the width is a multiple of 16 (1152, 1536, 3072, 4096), never elsewhere
    for c, v16 in ((77, {0}), (1000, {0}), (1152, {0, 1}), (1536, {0, 1}), (3072, {0, 1}), (4096, {0, 1})):
        assert {k.constants["V16"] for k in admitted(table, "ada_layer_norm_fp16", batch=8192, n_cols=c)} == v16, c
    assert not admitted(table, "ada_layer_norm_fp16", batch=4, n_cols=8193)
    k = admitted(table, "ada_layer_norm_fp16", batch=8192, n_cols=1536)[0]
    assert grid(table, k, batch=8192, n_cols=1536) == [8192, 1, 1]


def test_every_group_matches_float64_in_the_interpreter(table):
    assert len(matched_in_interpreter(table)) == 9


def test_a_v16_kernel_moves_whole_16_byte_vectors(table):
    """sm_90 PTX of SD3's gated-with-bias norm: without V16 each access is one element (the width may be any
    number), with it every load and store is a 16-byte vector."""
    assert global_accesses(table, "ada_layer_norm_gated_bias_fp16_b2048_w4") == {"ld.global.b16", "st.global.b16"}
    assert global_accesses(table, "ada_layer_norm_gated_bias_fp16_b2048_w4_v16") == {"ld.global.v4.b32",
                                                                                      "st.global.v4.b32"}
