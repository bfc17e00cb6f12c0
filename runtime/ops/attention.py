"""Multi-head attention, softmax(scale * Q K^T) V per head: what the library's attention op launches, by
the same contract rules as every op (the roles and problem variables a group's contract may use), and
its float64 reference.

Groups `attention[_causal][_any]_<dtype>` (kernels/attention_triton.py): the library's
tritonforge.MultiHeadAttention runs the causal ones for `unidirectional=1`, the others otherwise.
"""

from __future__ import annotations

import re

import numpy as np

from .. import zoo

GROUP = re.compile(r"attention(?P<causal>_causal)?(_[A-Za-z0-9]+)*_(?P<dtype>fp16|fp32|bf16)")
ROLES = {"q", "k", "v", "out", "scale", "q_batch_stride", "q_head_stride", "q_seq_stride", "k_batch_stride",
         "k_head_stride", "k_seq_stride", "v_batch_stride", "v_head_stride", "v_seq_stride", "out_batch_stride",
         "out_head_stride", "out_seq_stride", "heads", "kv_group", "sq", "skv", "head_dim"}
PROBLEM = {"batch", "heads", "sq", "skv", "head_dim", "strides8"}


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float | None = None,
                  causal: bool = False) -> np.ndarray:
    """float64 attention of (B, H, S, d) arrays; `scale` defaults to 1/sqrt(d); causal: query i attends keys
    0..i (top-left aligned). Key and value may have fewer heads, each serving H / Hkv query heads in turn."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal:
        sq, skv = s.shape[-2:]
        s = np.where(np.arange(sq)[:, None] >= np.arange(skv)[None, :], s, -np.inf)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bhqd", p, v)


def attention_mismatch(y: np.ndarray, ref: np.ndarray, dtype: str) -> str | None:
    """None when y matches ref, else the worst element. Outputs are weighted means of V's values (O(1)): the
    tolerance is absolute, a few roundings of the storage type on P and O plus the fp32 sums."""
    y = np.asarray(y, np.float64)
    if not np.isfinite(y).all():
        return f"{np.count_nonzero(~np.isfinite(y))} non-finite outputs"
    tol = {"fp32": 1e-5, "fp16": 4e-3, "bf16": 3e-2}[dtype]
    err = np.abs(y - ref) - tol * np.maximum(1.0, np.abs(ref))
    if (err > 0).any():
        i = tuple(int(a) for a in np.unravel_index(np.argmax(err), err.shape))
        return (f"{np.count_nonzero(err > 0)} elements off, worst at {i}: got {float(y[i])!r}, want "
                f"{float(ref[i])!r} (tolerance {tol})")
    return None


def default_shapes() -> list[tuple[int, int, int, int, int, bool]]:
    """(batch, heads, sq, skv, head_dim, causal) of every attention of the model zoo (runtime/zoo.py)."""
    return zoo.attention_problems()
