"""Every kernel of every script gets a checkable problem from its own launch contract (what both numerics
checks of a build run), and a case's check catches a wrong answer."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("triton", reason="kernel scripts import triton")

from tritonforge.pipeline.scripts.table import load_table  # noqa: E402
from tritonforge.runtime.kernel_cases import KernelSpec, case_for, contract_admits  # noqa: E402
from tritonforge.runtime.memory import from_storage, to_storage  # noqa: E402

RESIDENT = 132  # one program per SM of an H100/H200: the least room a cooperative kernel's device gives


@pytest.fixture(scope="module")
def specs(root):
    table = load_table(sorted((root / "kernels").glob("*_triton.py")))
    index: dict[str, int] = {}
    out = []
    for k in table.kernels:
        i = index[k.group] = index.get(k.group, -1) + 1
        out.append(KernelSpec(k.name, k.group, k.constants, k.num_warps, table.contracts[k.group], i))
    return out


def test_every_kernel_of_every_script_gets_a_problem_its_contract_admits(specs):
    """The GPU half checks every kernel of a build: none may be left without a problem (clusters,
    cooperative teams and the streamed rows included)."""
    missing = [s.name for s in specs
               if case_for(s, lambda env, s=s: contract_admits(s, {**env, "resident": RESIDENT})) is None]
    assert not missing, missing[:20]
    assert {s.family for s in specs} == {"softmax", "nhwc", "nchw", "attention", "ada_layer_norm", "rotary_embedding",
                                          "bias_concat", "bias_split_gelu", "fp8_quant_rows"}


def test_problems_are_awkward_and_vary_the_optional_inputs(specs):
    by_group = {}
    for s in specs:
        by_group.setdefault(s.group, []).append(s)
    softmax = case_for(by_group["softmax_any_fp32"][0])
    assert softmax.env["n_cols"] % 16 and softmax.env["batch"] > 1  # a partial vector, more than one row
    modes = {(c.label["skip"], c.label["bias"]) for c in (case_for(s) for s in by_group["GroupNormTriton_Silu_fp16"])
             if c is not None}
    assert {("none", False), ("full", True), ("broadcast", False)} <= modes
    team = by_group["GroupNormNCHWTeam_Pass_fp16"]
    env = case_for(team[0], lambda e: contract_admits(team[0], {**e, "resident": RESIDENT})).env
    assert env["hw"] % 16 == 0 and env["n"] * env["groups"] * team[0].constants["PARTS"] <= RESIDENT


def test_a_wrong_answer_is_named(specs):
    spec = next(s for s in specs if s.group == "GroupNormTriton_Silu_fp16" and s.index % 3 == 1)  # with a skip
    case = case_for(spec)
    n, hw, c = case.env["n"], case.env["hw"], case.env["c"]
    assert case.check({"out": np.zeros((n * hw, c)), "add_out": np.zeros((n * hw, c))}) is not None
    x, skip = (from_storage(to_storage(case.inputs[r][0], "fp16"), "fp16").astype(np.float64) for r in ("in", "skip"))
    bias = from_storage(to_storage(case.inputs["bias"][0], "fp16"), "fp16") if case.scalars["has_bias"] else 0
    right_sum = x + skip + bias
    # the sum is right; a normalised output of zeros is not
    got = case.check({"out": np.zeros_like(right_sum), "add_out": right_sum})
    assert got and "elements off" in got and not got.startswith("add_out")
