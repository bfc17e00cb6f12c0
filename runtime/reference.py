"""float64 softmax references and the tolerance check used by the tuner and the GPU tests."""

from __future__ import annotations

import numpy as np

from .memory import bf16_bits_to_f32, f32_to_bf16_bits

# |y - ref| <= ATOL + RTOL * |ref|: one or two roundings of the storage type, fp32 maths inside (fp64
# maths for fp64).
RTOL = {"fp32": 2e-5, "fp16": 2e-3, "bf16": 1.6e-2, "fp64": 1e-12}
ATOL = {"fp32": 1e-6, "fp16": 2e-5, "bf16": 1e-4, "fp64": 1e-15}


def quantize(x: np.ndarray, dtype: str) -> np.ndarray:
    """What the kernel sees: x rounded to the storage type, as float64."""
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        return bf16_bits_to_f32(f32_to_bf16_bits(x.astype(np.float32))).astype(np.float64)
    if dtype == "fp64":
        return x.astype(np.float64)
    return x.astype(np.float32).astype(np.float64)


def softmax_ref(x64: np.ndarray, log: bool) -> np.ndarray:
    shifted = x64 - x64.max(axis=-1, keepdims=True)
    if log:
        return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def mismatch(y: np.ndarray, ref: np.ndarray, dtype: str, log: bool) -> str | None:
    """None when y matches ref within the dtype's tolerance, else a description of the worst element."""
    y = y.astype(np.float64)
    if not np.isfinite(y).all():
        return f"{np.count_nonzero(~np.isfinite(y))} non-finite outputs"
    rtol = RTOL[dtype]
    atol = ATOL[dtype] if not log else 4 * rtol  # log-softmax values are O(1..10), not in [0, 1]
    err = np.abs(y - ref)
    bad = err > atol + rtol * np.abs(ref)
    if bad.any():
        i = np.unravel_index(np.argmax(err - (atol + rtol * np.abs(ref))), err.shape)
        return (f"{np.count_nonzero(bad)} elements off, worst at {i}: got {y[i]!r}, want {ref[i]!r} "
                f"(rtol {rtol}, atol {atol})")
    return None


def assert_close(y: np.ndarray, ref: np.ndarray, dtype: str, log: bool, what: str) -> None:
    problem = mismatch(y, ref, dtype, log)
    if problem:
        raise AssertionError(f"{what}: {problem}")


def group_norm_ref(x64: np.ndarray, gamma: np.ndarray, beta: np.ndarray, groups: int, eps: float, silu: bool,
                   skip64: np.ndarray | None = None, bias64: np.ndarray | None = None):
    """float64 GroupNorm over NHWC x (n, h, w, c); skip is (n, h, w, c) or broadcast (n, c). Returns (y, sum)."""
    n, h, w, c = x64.shape
    a = x64.copy()
    if skip64 is not None:
        a = a + (skip64.reshape(n, 1, 1, c) if skip64.size == n * c else skip64)
    if bias64 is not None:
        a = a + bias64.reshape(1, 1, 1, c)
    g = a.reshape(n, h * w, groups, c // groups)
    mean = g.mean(axis=(1, 3), keepdims=True)
    var = g.var(axis=(1, 3), keepdims=True)
    y = ((g - mean) / np.sqrt(var + eps)).reshape(n, h, w, c) * gamma + beta
    if silu:
        y = y / (1 + np.exp(-y))
    return y, a


def group_norm_mismatch(y: np.ndarray, ref: np.ndarray, dtype: str) -> str | None:
    """GroupNorm outputs are O(1) after normalisation: the log-softmax tolerance (an absolute term
    of a few storage-type roundings) fits them."""
    return mismatch(y, ref, dtype, log=True)
