"""runtime/ortlib/fp8.py: the bytes agree with round_e4m3 (frexp's rounding, written apart) everywhere it is hard."""

import numpy as np
from tritonforge.runtime.ortlib.fp8 import E4M3_MAX, from_e4m3_bytes, quantize_rows, round_e4m3, to_e4m3_bytes


def _every_value() -> np.ndarray:
    v = from_e4m3_bytes(np.arange(256))
    return np.sort(v[~np.isnan(v)])


def _same(x: np.ndarray) -> None:
    got = from_e4m3_bytes(to_e4m3_bytes(x))
    want = round_e4m3(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_ties_go_to_even_and_their_neighbours_to_the_nearer_value():
    v = _every_value()
    mid = (v[1:] + v[:-1]) / 2  # each is a tie: subnormal, normal, and across every exponent step
    _same(np.concatenate([v, mid, np.nextafter(mid, -np.inf), np.nextafter(mid, np.inf)]))


def test_it_saturates_past_448_and_keeps_nan_and_signed_zero():
    x = np.array([448.0, 463.99, 464.0, 480.0, 1e30, np.inf, -np.inf, -1e30, np.nan, 0.0, -0.0,
                  2.0 ** -10, -(2.0 ** -11)])
    got = to_e4m3_bytes(x)
    assert list(got[:8]) == [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE]
    assert got[8] == 0x7F and got[9] == 0x00 and got[10] == 0x80
    _same(x)


def test_a_large_array_done_in_slices_is_byte_for_byte_the_small_path():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3 << 20) + 7) * 10.0 ** rng.uniform(-5, 3, (3 << 20) + 7)  # past two slices, ragged
    whole = to_e4m3_bytes(x)
    parts = np.concatenate([to_e4m3_bytes(x[i:i + 4096]) for i in range(0, x.size, 4096)])
    np.testing.assert_array_equal(whole, parts)
    _same(x[::97])


def test_rows_of_a_transposed_weight_are_scaled_by_their_own_largest_magnitude():
    w = np.random.default_rng(1).standard_normal((64, 96)).astype(np.float16)
    q, scale = quantize_rows(w.T)  # as the rewrite quantizes a (K, N) weight: one row per output channel
    assert q.shape == (96, 64) and q.flags.c_contiguous and scale.shape == (96,)
    back = from_e4m3_bytes(q) * scale[:, None]
    np.testing.assert_allclose(np.abs(back).max(axis=1), np.abs(w.T.astype(np.float64)).max(axis=1), rtol=1e-6)
    assert np.abs(back - w.T).max() <= np.abs(w).max() * 2.0 ** -4
    np.testing.assert_array_equal(np.abs(from_e4m3_bytes(q)).max(axis=1), np.full(96, E4M3_MAX))
