"""GEGLU with its Linear's bias, `(x[..., :h] + b[:h]) * gelu(x[..., h:] + b[h:])` (exact, erf GELU): the roles and
problem variables its kernels' contracts speak of (kernels/bias_split_gelu_triton.py), and the float64 reference
its checks compare with."""

from __future__ import annotations

import math
import re

import numpy as np

from ..reference import mismatch

GROUP = re.compile(r"bias_split_gelu(_[A-Za-z0-9]+)*_(?P<dtype>fp16|fp32|bf16)")
ROLES = {"out", "in", "bias", "batch", "n_cols"}
PROBLEM = {"batch", "n_cols"}


def bias_split_gelu_ref(x64: np.ndarray, bias64: np.ndarray) -> np.ndarray:
    """float64 GEGLU of x (..., 2h) with its bias (2h): (..., h)."""
    h = x64.shape[-1] // 2
    y = x64 + bias64
    gate = y[..., h:]
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return y[..., :h] * 0.5 * gate * (1 + erf(gate / math.sqrt(2)))


def bias_split_gelu_mismatch(y: np.ndarray, ref: np.ndarray, dtype: str) -> str | None:
    """Outputs are O(|x|^2): the tolerance with an absolute term."""
    return mismatch(y, ref, dtype, log=True)
