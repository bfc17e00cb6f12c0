"""fp8 e4m3 (ONNX's FLOAT8E4M3FN, CUDA's __nv_fp8_e4m3) in numpy: rounding, bytes and back, and per-row scales.

e4m3fn: 1 sign, 4 exponent (bias 7) and 3 mantissa bits, no infinities, largest finite 448, smallest normal 2^-6,
subnormal step 2^-9; 0x7f / 0xff are NaN. Rounding is to nearest, ties to even, saturating at +-448 (the GPU's
`satfinite` conversion), so numpy's answer and the kernels' agree bit for bit.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

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
    """The e4m3 bytes (uint8) of `x` rounded as round_e4m3 rounds. A model's weights are billions of values, so
    the rounding is done on float64's bits, and a large array in slices on every core (numpy lets go of the GIL)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size < _SLICE * 2:
        return _e4m3_bytes(x)
    flat, out = x.reshape(-1), np.empty(x.size, dtype=np.uint8)

    def one(start: int) -> None:
        out[start:start + _SLICE] = _e4m3_bytes(flat[start:start + _SLICE])

    with ThreadPoolExecutor(max_workers=min(os.cpu_count() or 1, 16)) as pool:
        list(pool.map(one, range(0, x.size, _SLICE)))
    return out.reshape(x.shape)


_SLICE = 1 << 20
_DROP = 52 - 3  # float64's mantissa bits less e4m3's


def _e4m3_bytes(x: np.ndarray) -> np.ndarray:
    a = x.view(np.int64) & np.int64(0x7FFF_FFFF_FFFF_FFFF)
    # normals: the mantissa rounded to 3 bits in the integer, ties to even; a carry moves the exponent up, as it should
    r = (a + ((np.int64(1) << (_DROP - 1)) - 1) + ((a >> _DROP) & 1)) >> _DROP
    e = (r >> 3) - 1023 + 7  # e4m3's biased exponent
    normal = np.minimum((e << 3) | (r & 7), 0x7E)  # 0x7e: 448, where it saturates
    # below 2^-6 the step is 2^-9: the count of steps, rounded to even, is the byte itself (8 is 2^-6's)
    small = np.rint(np.fmin(np.abs(x), 1.0) * 512.0).astype(np.int64)
    byte = np.where(e >= 1, normal, small) | np.where(np.signbit(x), 0x80, 0)
    return np.where(np.isnan(x), 0x7F, byte).astype(np.uint8)


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
    x = np.ascontiguousarray(x, dtype=np.float64)  # a weight comes transposed: its bytes are written in this order
    amax = np.max(np.abs(x), axis=axis, keepdims=True) if x.size else np.zeros_like(x)
    scale = np.where(amax > 0, amax / E4M3_MAX, 1.0).astype(np.float32)
    return to_e4m3_bytes(x / scale.astype(np.float64)), np.squeeze(scale, axis=axis)
