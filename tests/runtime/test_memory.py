"""Host-side storage types: bf16 as the upper half of fp32 (round to nearest even), the element sizes."""

from __future__ import annotations

import numpy as np
from tritonforge.runtime.memory import element_size, from_storage, to_storage


def test_bf16_storage_round_trip_and_sizes():
    x = np.array([1.0, -2.5, 3.0e38, 1 + 2 ** -8, 1 + 3 * 2 ** -8], np.float32)
    bits = to_storage(x, "bf16")
    assert bits.dtype == np.uint16 and bits[0] == 0x3F80 and bits[1] == 0xC020
    back = from_storage(bits, "bf16")
    assert back.dtype == np.float32 and back[0] == 1.0 and back[1] == -2.5
    assert back[3] == 1.0 and back[4] == 1 + 2 ** -6  # ties to even
    assert to_storage(x, "fp16").dtype == np.float16 and from_storage(to_storage(x, "fp32"), "fp32").dtype == np.float32
    assert [element_size(d) for d in ("fp16", "bf16", "fp32", "fp64")] == [2, 2, 4, 8]
