"""The float64 checks the tuner and benchmarks run before timing: a large GroupNorm is checked on sampled
pixels against statistics of every whole group, which must equal the full reference there."""

from __future__ import annotations

import numpy as np
from tritonforge.runtime.ops.group_norm import GroupNormProblem, group_norm_ref, sampled_reference
from tritonforge.runtime.reference import quantize


def test_sampled_reference_equals_the_full_one_at_its_pixels():
    rng = np.random.default_rng(3)
    for dtype, silu in (("fp16", True), ("fp32", False)):
        p = GroupNormProblem(dtype, 2, 300, 96, 32, silu, eps=1e-6)
        x = (rng.standard_normal((p.n * p.hw, p.c)) * 3 + 1).astype(np.float32)
        gamma, beta = rng.uniform(0.5, 1.5, p.c), rng.uniform(-0.5, 0.5, p.c)
        rows, ref = sampled_reference(x, gamma, beta, p, rng, chunk=7)  # chunks that split a group
        full, _ = group_norm_ref(quantize(x, dtype).reshape(p.n, p.hw, 1, p.c), gamma, beta, 32, 1e-6, silu)
        np.testing.assert_allclose(ref, full.reshape(-1, p.c)[rows], rtol=1e-12, atol=1e-12)
        assert {0, 299, 300, 599} <= set(rows.tolist())  # each image's first and last pixels
        assert len(rows) == len(set(rows.tolist()))
