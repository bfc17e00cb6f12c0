"""Rotary embedding: rows of a head per program, the smallest block that holds the row, and the interpreter
against float64."""

from __future__ import annotations

from .conftest import admitted, global_accesses, grid, matched_in_interpreter


def test_groups_contract_and_signature(table):
    assert sorted(table.contracts) == sorted(f"rotary_embedding{form}_{dt}" for dt in ("fp32", "fp16", "bf16")
                                             for form in ("", "_rms"))
    for k in table.kernels:
        if "_rms_" in k.group:
            assert table.contracts[k.group]["params"] == [
                "out", "in", "in_b", "gamma", "gamma_b", "cos", "sin", "batch", "n_cols", "seq_a", "seq_b",
                "rows_per_token", "positions", "rows_per_position", "eps"]
            # x and both streams in the model's type; gammas, cos and sin fp32 whatever x is
            assert [p.type for p in k.params[:7]] == [f"*{k.group.rsplit('_', 1)[1]}"] * 3 + ["*fp32"] * 4
            continue
        assert table.contracts[k.group]["params"] == ["out", "in", "cos", "sin", "batch", "n_cols", "positions",
                                                      "rows_per_position"]
        assert [p.type for p in k.params[2:4]] == ["*fp32", "*fp32"]  # cos and sin stay fp32 whatever x is


def test_each_head_width_has_the_smallest_block_that_holds_it(table):
    for d in (16, 64, 88, 128, 3072, 8192):
        blocks = {k.constants["BLOCK_D"] for k in admitted(table, "rotary_embedding_bf16", batch=4096, n_cols=d)}
        assert len(blocks) == 1 and d <= blocks.pop() < max(2 * d, 65), d
        d16 = {k.constants["D16"] for k in admitted(table, "rotary_embedding_bf16", batch=4096, n_cols=d)}
        assert d16 == ({0, 1} if d in (16, 64, 128) else {0}), d
    assert not admitted(table, "rotary_embedding_bf16", batch=4, n_cols=8194)
    # the norm holds a row in one tile: head widths only, the smallest block that holds the row
    for d in (64, 88, 128, 256):
        blocks = {k.constants["BLOCK_D"] for k in admitted(table, "rotary_embedding_rms_fp16", batch=4096, n_cols=d)}
        assert len(blocks) == 1 and d <= blocks.pop() < max(2 * d, 65), d
    assert not admitted(table, "rotary_embedding_rms_fp16", batch=4096, n_cols=258)
    k = admitted(table, "rotary_embedding_bf16", batch=1000, n_cols=128)[0]
    assert grid(table, k, batch=1000, n_cols=128) == [-(-1000 // k.constants["BLOCK_R"]), 1, 1]


def test_every_group_matches_float64_in_the_interpreter(table):
    kernels = matched_in_interpreter(table)
    # each group's kernels with and without D16 (pairs split in registers, whole vectors); the rms groups'
    # first kernel joins two streams
    assert len(kernels) == 12 and sorted(k["constants"]["D16"] for k in kernels) == [0] * 6 + [1] * 6
    assert {k["group"] for k in kernels if "_rms_" in k["group"]} == {f"rotary_embedding_rms_{dt}"
                                                                      for dt in ("fp32", "fp16", "bf16")}


def test_a_d16_kernel_moves_whole_16_byte_vectors_and_reads_x_once(table):
    """sm_90 PTX of the head_dim-128 kernels: without D16 every access is one element (n_cols may be any even
    number), the partner a second load of x; with it, x, cos and sin come in 16-byte vectors and y goes out so."""
    assert global_accesses(table, "rotary_embedding_fp16_d128_r32_w4") == {"ld.global.b16", "ld.global.b32",
                                                                           "st.global.b16"}
    assert global_accesses(table, "rotary_embedding_fp16_d128_r32_w4_d16") == {"ld.global.v4.b32", "st.global.v4.b32"}
