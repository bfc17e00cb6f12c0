"""Timing rotates inputs over enough slots that L2 never holds the next launch's input."""

from __future__ import annotations

from tritonforge.runtime.timing import rotation_slots

L2 = 60 * 2 ** 20  # an H200's


def test_the_rotation_spans_three_l2s():
    assert rotation_slots(2 ** 20, L2) == 180  # 1 MiB pairs
    assert rotation_slots(200 * 2 ** 20, L2) == 1  # one pair already three times L2
    assert rotation_slots(1, L2) == 256 and rotation_slots(0, L2) == 256  # capped
    for pair in (3000, 2 ** 22 + 7, 61 * 2 ** 20):
        n = rotation_slots(pair, L2)
        assert n * pair >= 3 * L2 or n == 256
        assert n == 1 or (n - 1) * pair < 3 * L2
