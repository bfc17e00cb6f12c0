"""AdaLN: LayerNorm without affine, modulated per item (`y = LN(x) * (1 + scale) + shift`), after an optional
gated residual (`x = x + gate * (branch + bias)`, clipped, also written; no bias: zero): the roles and problem variables
its kernels' contracts speak of (kernels/ada_layer_norm_triton.py), and the float64 reference its checks compare
with."""

from __future__ import annotations

import re

import numpy as np

from ..reference import mismatch

GROUP = re.compile(r"ada_layer_norm(?P<gated>_gated(?P<bias>_bias)?)?(_[A-Za-z0-9]+)*_(?P<dtype>fp16|fp32|bf16)")
ROLES = {"out", "in", "mod_scale", "mod_shift", "skip", "gate", "add_out", "bias", "n_cols", "rows_per_item", "eps",
         "clip_lo", "clip_hi"}
PROBLEM = {"batch", "n_cols"}
PLAIN, GATED, GATED_BIAS = 0, 1, 2  # the form a group serves (the library's variant number)


def form_of(m: re.Match) -> int:
    """The form of a group GROUP matched."""
    return GATED_BIAS if m.group("bias") else GATED if m.group("gated") else PLAIN


def ada_layer_norm_ref(x64: np.ndarray, scale64: np.ndarray, shift64: np.ndarray, eps: float,
                       branch64: np.ndarray | None = None, gate64: np.ndarray | None = None,
                       bias64: np.ndarray | None = None, clip: tuple[float, float] | None = None):
    """float64 (y, sum) of x (items, rows_per_item, n_cols) with scale, shift and gate (items, n_cols); sum is
    x + gate * (branch + bias) (x itself without a branch; no bias: zero), clipped to `clip` (lo, hi) if given."""
    if branch64 is not None and bias64 is not None:
        branch64 = branch64 + bias64
    s = x64 if branch64 is None else x64 + gate64[:, None, :] * branch64
    if clip is not None and branch64 is not None:
        s = np.clip(s, *clip)
    centred = s - s.mean(axis=-1, keepdims=True)
    y = centred / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)
    return y * (1 + scale64[:, None, :]) + shift64[:, None, :], s


def ada_layer_norm_mismatch(y: np.ndarray, ref: np.ndarray, dtype: str) -> str | None:
    """Normalised outputs are O(1): the tolerance with an absolute term (as GroupNorm's)."""
    return mismatch(y, ref, dtype, log=True)
