import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.scripts import abi


def test_c_layout_matches_ort_structs():
    # Softmax {void* out; const void* in; int in_stride; int out_stride; int n_cols;}: 28 B, sizeof 32.
    slots, size = abi.c_layout([8, 8, 4, 4, 4])
    assert [(s.offset, s.size) for s in slots] == [(0, 8), (8, 8), (16, 4), (20, 4), (24, 4)]
    assert size == 32
    # GroupNorm: 7 pointers, 3 ints, float, 3 bools -> 75 B of fields, sizeof 80.
    slots, size = abi.c_layout([8] * 7 + [4, 4, 4, 4, 1, 1, 1])
    assert slots[-1].offset == 74 and size == 80


def test_parse_param_type():
    assert abi.parse_param_type("*fp16").size == 8
    assert abi.parse_param_type(" i1 ").size == 1
    assert abi.parse_param_type("*bf16:16").divisibility == 16
    assert abi.parse_param_type("i32:1").divisibility is None
    for bad in ("*float", "int", "i32:8", "fp32:16"):
        with pytest.raises(ValueError):
            abi.parse_param_type(bad)


PTX = """
.visible .entry k(
	.param .u64 .ptr .global .align 1 k_param_0,
	.param .u32 k_param_1,
	.param .u8 k_param_2,
	.param .u64 .ptr .global .align 1 k_param_3,
	.param .u64 .ptr .global .align 1 k_param_4
)
"""


def test_ptx_slots_and_hidden_params():
    declared = abi.ptx_param_slots(PTX, "k")
    assert [(s.offset, s.size) for s in declared] == [(0, 8), (8, 4), (12, 1), (16, 8), (24, 8)]
    params = [abi.parse_param_type(t) for t in ("*fp32", "i32", "i1")]
    layout = abi.describe_layout(params, declared, "k")
    assert [h["name"] for h in layout["hidden"]] == ["global_scratch", "profile_scratch"]
    assert layout["args_size"] == 32
    with pytest.raises(PipelineError, match="parameter 1"):
        abi.describe_layout([abi.parse_param_type(t) for t in ("*fp32", "i64", "i1")], declared, "k")


def test_amdgpu_metadata_slots_skip_hidden_kernargs():
    text = """amdhsa.kernels:
  - .args:
      - .address_space:  global
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .offset:         8
        .size:           4
        .value_kind:     by_value
      - .offset:         16
        .size:           8
        .value_kind:     hidden_global_offset_x
    .kernarg_segment_size: 24
    .name:           k
"""
    slots, seg = abi.amdgpu_arg_slots(text, "k")
    assert [(s.offset, s.size) for s in slots] == [(0, 8), (8, 4)] and seg == 24
