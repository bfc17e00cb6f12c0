"""Argument packing matches the C struct ORT builds, plus Triton's hidden slots (CPU)."""

from __future__ import annotations

import ctypes
import json

import pytest
from tritonforge.runtime.packing import ArgumentRangeError, bf16_bits, pack


class OrtSoftmaxArgs(ctypes.Structure):
    # softmax_triton.cuh's struct, then the two hidden pointers Triton 3.5 appends.
    _fields_ = [("out", ctypes.c_void_p), ("in_", ctypes.c_void_p), ("in_stride", ctypes.c_int),
                ("out_stride", ctypes.c_int), ("n_cols", ctypes.c_int),
                ("global_scratch", ctypes.c_void_p), ("profile_scratch", ctypes.c_void_p)]


def test_pack_equals_c_struct(built):
    _, out, _ = built
    kernels = json.loads((out / "cuda/sm_90/kernels.json").read_text())["kernels"]
    k = next(k for k in kernels if k["group"] == "softmax_fp32")
    values = {"output_ptr": 0x7F0000001000, "input_ptr": 0x7F0000002000, "input_row_stride": 4099,
              "output_row_stride": 4097, "n_cols": 4093}
    got = pack(k["args_size"], k["params"], values, k["hidden_params"], {"profile_scratch": 0x1234})
    want = OrtSoftmaxArgs(0x7F0000001000, 0x7F0000002000, 4099, 4097, 4093, 0, 0x1234)
    assert got == bytes(want) and len(got) == ctypes.sizeof(OrtSoftmaxArgs) == 48


def test_bf16_rounding():
    assert bf16_bits(1.0) == 0x3F80
    assert bf16_bits(-2.0) == 0xC000
    assert bf16_bits(1.0 + 2**-8) == 0x3F80  # tie rounds to even
    assert bf16_bits(1.0 + 3 * 2**-9) == 0x3F81


def test_a_value_past_an_i32_parameter_is_refused_naming_the_kernel_and_parameter(built):
    _, out, _ = built
    kernels = json.loads((out / "cuda/sm_90/kernels.json").read_text())["kernels"]
    k = next(k for k in kernels if k["group"] == "softmax_fp32")
    values = {"output_ptr": 1 << 40, "input_ptr": 2 << 40, "input_row_stride": 4099, "output_row_stride": 4097,
              "n_cols": 4093}
    for past in (2**31, -2**31 - 1, 2**32 + 5):  # 2^32 + 5 would have been stored as 5
        with pytest.raises(ArgumentRangeError, match=rf"{k['name']}: argument 'input_row_stride' = {past} is past "
                                                      r"its i32"):
            pack(k["args_size"], k["params"], {**values, "input_row_stride": past}, kernel=k["name"])
    # the range's own ends are values
    for edge in (2**31 - 1, -2**31):
        pack(k["args_size"], k["params"], {**values, "input_row_stride": edge}, kernel=k["name"])
