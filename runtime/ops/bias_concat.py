"""Two token streams joined on their sequence axis, each with its bias added: the roles and problem variables its
kernels' contracts speak of (kernels/bias_concat_triton.py), and the float64 reference its checks compare with."""

from __future__ import annotations

import re

import numpy as np

from ..reference import mismatch

GROUP = re.compile(r"bias_concat(_[A-Za-z0-9]+)*_(?P<dtype>fp16|fp32|bf16)")
ROLES = {"out", "in", "in_b", "bias", "bias_b", "batch", "n_cols", "seq_a", "seq_b"}
PROBLEM = {"batch", "n_cols"}


def bias_concat_ref(a64: np.ndarray, b64: np.ndarray, bias_a64: np.ndarray, bias_b64: np.ndarray) -> np.ndarray:
    """float64 concat([a + bias_a, b + bias_b]) on axis 1 of (items, seq, C) streams."""
    return np.concatenate([a64 + bias_a64, b64 + bias_b64], axis=1)


def bias_concat_mismatch(y: np.ndarray, ref: np.ndarray, dtype: str) -> str | None:
    """Outputs are O(|x|): the tolerance with an absolute term."""
    return mismatch(y, ref, dtype, log=True)
