"""Rows quantized to fp8 e4m3 with a scale a row: the roles and problem variables its kernels' contracts speak of
(kernels/fp8_quant_rows_triton.py), and the float64 reference its checks compare with."""

from __future__ import annotations

import re

import numpy as np

from ..ortlib.fp8 import from_e4m3_bytes, quantize_rows

GROUP = re.compile(r"fp8_quant_rows(_[A-Za-z0-9]+)*_(?P<dtype>fp16|bf16)")
ROLES = {"out", "row_scale", "in", "batch", "n_cols"}
PROBLEM = {"batch", "n_cols"}


def fp8_quant_rows_ref(x64: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(e4m3 values as float64, float32 scales) of each row of `x64` (batch, n_cols)."""
    q, scale = quantize_rows(x64)
    return from_e4m3_bytes(q), scale


def fp8_quant_rows_mismatch(q: np.ndarray, scale: np.ndarray, ref_q: np.ndarray, ref_scale: np.ndarray) -> str | None:
    """The scales to fp32's rounding, the values exactly but for a tie the kernel's fp32 division may break the
    other way (one e4m3 step, never more, on at most one in a thousand)."""
    if not np.allclose(scale, ref_scale, rtol=2e-7, atol=0):
        i = int(np.argmax(np.abs(scale - ref_scale)))
        return f"row {i}: scale {scale[i]!r}, expected {ref_scale[i]!r}"
    off = q != ref_q
    step = np.abs(ref_q) / 8 + 2.0 ** -9  # an e4m3 step at that magnitude, or more
    if np.any(np.abs(q - ref_q)[off] > step[off]) or off.mean() > 1e-3:
        i = int(np.argmax(np.abs(q - ref_q)))
        return (f"{int(off.sum())} of {q.size} values differ; at flat index {i}: {q.flat[i]!r}, "
                f"expected {ref_q.flat[i]!r}")
    return None
