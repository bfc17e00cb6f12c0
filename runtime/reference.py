"""What every op's float64 check shares: rounding to the storage type and the tolerance test (each op
module holds its own reference)."""

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
        i = tuple(int(v) for v in np.unravel_index(np.argmax(err - (atol + rtol * np.abs(ref))), err.shape))
        return (f"{np.count_nonzero(bad)} elements off, worst at {i}: got {float(y[i])!r}, want {float(ref[i])!r} "
                f"(rtol {rtol}, atol {atol})")
    return None


def assert_close(y: np.ndarray, ref: np.ndarray, dtype: str, log: bool, what: str) -> None:
    problem = mismatch(y, ref, dtype, log)
    if problem:
        raise AssertionError(f"{what}: {problem}")
