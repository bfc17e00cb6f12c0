"""What every op's float64 check shares: rounding to the storage type and the tolerance test."""

from __future__ import annotations

import numpy as np
from tritonforge.runtime.reference import RTOL, assert_close, mismatch, quantize


def test_quantize_rounds_as_the_storage_type_does():
    x = np.array([1 / 3, 1e-8, 65504.0, 3.14159265])
    assert np.array_equal(quantize(x, "fp16"), x.astype(np.float16).astype(np.float64))
    assert quantize(np.array([1 + 2 ** -9]), "bf16")[0] == 1.0  # bf16 keeps 8 bits: rounds to even
    assert quantize(np.array([1 + 3 * 2 ** -9]), "bf16")[0] == 1 + 2 ** -7
    assert quantize(x, "fp64").dtype == np.float64 and quantize(x, "fp32")[0] == np.float32(1 / 3)


def test_mismatch_names_the_worst_element_and_non_finite_outputs():
    ref = np.full((4, 8), 0.125)
    assert mismatch(ref * (1 + RTOL["fp16"] / 2), ref, "fp16", False) is None
    off = ref.copy()
    off[2, 5] = 0.2
    said = mismatch(off, ref, "fp16", False)
    assert said.startswith("1 elements off, worst at (2, 5)")
    nan = ref.copy()
    nan[0, 0] = np.nan
    assert mismatch(nan, ref, "fp32", False) == "1 non-finite outputs"
    try:
        assert_close(off, ref, "fp16", False, "softmax fp16 4x8")
    except AssertionError as exc:
        assert str(exc).startswith("softmax fp16 4x8: 1 elements off")
    else:
        raise AssertionError("assert_close let an element 60% off through")
