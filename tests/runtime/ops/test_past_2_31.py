"""ORT's groups past 2^31 elements (a long sequence's softmax, a 4K-class decode's GroupNorm): every kernel of
each group either runs right against float64 on sampled rows, rows past the 2^31st element among them, or is
refused before launch (its contract does not admit the problem, or preparing it raises Unsupported). After
all of it, the CUDA context still runs a small problem."""

from __future__ import annotations

import numpy as np
import pytest
from tritonforge.runtime.launch import Unsupported
from tritonforge.runtime.ops.group_norm import GroupNormProblem
from tritonforge.runtime.ops.softmax import SoftmaxProblem, softmax_numpy, softmax_ref
from tritonforge.runtime.reference import assert_close

from ..conftest import skip_unless_memory

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("one_at_a_time")]

PAST = 2**31
# The groups ORT's ops look up (the ORT profile), written out here rather than read from the profile code.
ORT_GROUPS = [f"softmax_{dt}" for dt in ("fp32", "fp16", "bf16", "fp64")] + [
    f"GroupNormTriton_{act}_{dt}" for act in ("Silu", "Pass") for dt in ("fp16", "fp32")]


def big_problem(group: str):
    """A problem of `group`'s op just past 2^31 elements."""
    if group.startswith("softmax_"):
        return SoftmaxProblem("softmax", group.split("_")[1], 540_000, 4096)  # rows from 524288 on lie past
    _, act, dtype = group.split("_")
    return GroupNormProblem(dtype, 2, 2900 * 2900, 128, 32, silu=act == "Silu")  # image 1's last 42784 pixels


@pytest.mark.parametrize("group", ORT_GROUPS)
def test_every_kernel_of_an_ort_group_past_2_31_elements_is_right_or_refused(registry, group):
    assert group in registry.by_group, f"{group} is not in {registry.artifacts.path}"
    problem = big_problem(group)
    skip_unless_memory(registry.backend, problem.bytes_moved, f"{group} past 2^31 elements")
    setup = problem.setup(registry, None, np.random.default_rng(31))
    right, refused = [], []
    try:
        cols = getattr(problem, "n_cols", None) or problem.c
        assert (max(setup.check_rows) + 1) * cols > PAST, "no sampled row lies past 2^31 elements"
        admitted = {name for name in setup.candidates() if registry.by_name[name].group == group}
        for info in registry.by_group[group]:
            if info.name not in admitted:
                refused.append(info.name)
                continue
            try:
                setup.launch(info.name)
            except Unsupported:
                refused.append(info.name)
                continue
            why = setup.check(info.name)
            assert why is None, f"{info.name} on {problem}: {why}"
            right.append(info.name)
    finally:
        setup.free()
    assert right, f"no kernel of {group} runs {problem} (refused: {refused})"
    x = np.random.default_rng(1).standard_normal((3, 77)).astype(np.float32)  # the context is still usable
    assert_close(softmax_numpy(registry, x, "fp32"), softmax_ref(x.astype(np.float64), False), "fp32", False,
                 "a small softmax after")
