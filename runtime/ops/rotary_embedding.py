"""Rotary position embedding on interleaved pairs, `y = x * cos + rot(x) * sin` with rot taking (x[2i], x[2i+1])
to (-x[2i+1], x[2i]), in its `rms` form after an RMSNorm of each row (and the join of two streams): the roles and
problem variables its kernels' contracts speak of (kernels/rotary_embedding_triton.py), and the float64
reference its checks compare with."""

from __future__ import annotations

import re

import numpy as np

from ..reference import mismatch

GROUP = re.compile(r"rotary_embedding(?P<rms>_rms)?(_[A-Za-z0-9]+)*_(?P<dtype>fp16|fp32|bf16)")
ROLES = {"out", "in", "cos", "sin", "batch", "n_cols", "positions", "rows_per_position", "in_b", "gamma", "gamma_b",
         "seq_a", "seq_b", "rows_per_token", "eps"}
PROBLEM = {"batch", "n_cols"}
PLAIN, RMS = 0, 1  # the form a group serves (the library's variant number)


def form_of(m: re.Match) -> int:
    """The form of a group GROUP matched."""
    return RMS if m.group("rms") else PLAIN


def rms_norm_ref(x64: np.ndarray, gamma64: np.ndarray, eps: float) -> np.ndarray:
    """float64 x / sqrt(mean(x^2) + eps) * gamma over the last axis."""
    return x64 / np.sqrt((x64 * x64).mean(axis=-1, keepdims=True) + eps) * gamma64


def rotate_pairs(x: np.ndarray) -> np.ndarray:
    """(-x[2i+1], x[2i]) for each pair of the last axis."""
    pairs = x.reshape(*x.shape[:-1], -1, 2)
    return np.stack([-pairs[..., 1], pairs[..., 0]], axis=-1).reshape(x.shape)


def rotary_embedding_ref(x64: np.ndarray, cos64: np.ndarray, sin64: np.ndarray) -> np.ndarray:
    """float64 y of x with cos and sin broadcast against it (numpy's rules)."""
    return x64 * cos64 + rotate_pairs(x64) * sin64


def rotary_embedding_mismatch(y: np.ndarray, ref: np.ndarray, dtype: str) -> str | None:
    """Outputs are O(|x|): the tolerance with an absolute term."""
    return mismatch(y, ref, dtype, log=True)
