"""fp8 e4m3 (ONNX's FLOAT8E4M3FN, CUDA's __nv_fp8_e4m3) in numpy: rounding, bytes and back, and per-row scales.

e4m3fn: 1 sign, 4 exponent (bias 7) and 3 mantissa bits, no infinities, largest finite 448, smallest normal 2^-6,
subnormal step 2^-9; 0x7f / 0xff are NaN. Rounding is to nearest, ties to even, saturating at +-448 (the GPU's
`satfinite` conversion), so numpy's answer and the kernels' agree bit for bit.
"""

from __future__ import annotations

import numpy as np

E4M3_MAX = 448.0


def round_e4m3(x: np.ndarray) -> np.ndarray:
    """`x` rounded to the nearest e4m3 value (float64), saturating at +-448; NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    _, e = np.frexp(np.where(a > 0, a, 1.0))  # a = m * 2^e, m in [0.5, 1)
    step = np.exp2(np.maximum(e - 1, -6) - 3)  # 3 mantissa bits below the leading one; subnormals below 2^-6
    return np.clip(np.rint(x / step) * step, -E4M3_MAX, E4M3_MAX)


def to_e4m3_bytes(x: np.ndarray) -> np.ndarray:
    """The e4m3 bytes (uint8) of `x` rounded as round_e4m3 rounds."""
    q = round_e4m3(x)
    a = np.abs(q)
    _, e = np.frexp(np.where(a > 0, a, 1.0))
    exp = np.maximum(e - 1, -6)
    normal = a >= 2.0 ** -6
    mant = np.where(normal, a / np.exp2(exp) - 1.0, a / 2.0 ** -9) * np.where(normal, 8, 1)
    bits = np.where(normal, (exp + 7) << 3, 0) + np.rint(mant).astype(np.int64)
    bits = bits | np.where(np.signbit(q), 0x80, 0)
    return np.where(np.isnan(q), 0x7F, bits).astype(np.uint8)


_DECODE = None


def from_e4m3_bytes(b: np.ndarray) -> np.ndarray:
    """float64 values of e4m3 bytes."""
    global _DECODE
    if _DECODE is None:
        v = np.arange(256)
        exp, mant = (v >> 3) & 0xF, v & 7
        mag = np.where(exp == 0, mant * 2.0 ** -9, (1 + mant / 8.0) * np.exp2(exp - 7.0))
        mag = np.where((v & 0x7F) == 0x7F, np.nan, mag)
        _DECODE = np.where(v & 0x80, -mag, mag)
    return _DECODE[np.asarray(b, dtype=np.uint8)]


def quantize_rows(x: np.ndarray, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """Per-row e4m3: (bytes, float32 scales) with x ~= from_e4m3_bytes(bytes) * scale, each row's scale its
    largest magnitude over 448 (1 for an all-zero row), reduced along `axis`."""
    x = np.asarray(x, dtype=np.float64)
    amax = np.max(np.abs(x), axis=axis, keepdims=True) if x.size else np.zeros_like(x)
    scale = np.where(amax > 0, amax / E4M3_MAX, 1.0).astype(np.float32)
    return to_e4m3_bytes(x / scale.astype(np.float64)), np.squeeze(scale, axis=axis)
