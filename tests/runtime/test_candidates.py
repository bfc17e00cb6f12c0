"""Launch contracts decide the candidates on a real GPU: every kernel admitted for a problem satisfies its
contract's requires, the grid is the contract's, and a kernel asked for by name that the contract refuses
is Unsupported, naming the problem."""

from __future__ import annotations

import pytest
from tritonforge.runtime import candidates
from tritonforge.runtime.expressions import evaluate
from tritonforge.runtime.launch import Unsupported
from tritonforge.runtime.ops.softmax import PROBLEM, ROLES

pytestmark = pytest.mark.gpu


def test_admitted_kernels_satisfy_their_contract(registry):
    groups = candidates.groups_of(registry, r"softmax(_[A-Za-z0-9]+)*_fp16", ROLES, PROBLEM)
    assert "softmax_fp16" in groups and len(groups) > 1
    env = {"batch": 33, "n_cols": 1000, "in_stride": 1000, "out_stride": 1000}
    for group in groups:
        contract = registry.artifacts.contract(group)
        for name, grid in candidates.admitted(registry, group, env):
            info = registry.by_name[name]
            scope = {**env, **info.constants, "num_warps": info.num_warps}
            if any("resident" in r for r in contract.get("requires", [])):
                scope["resident"] = registry.kernel(name).resident  # programs the device holds at once
            assert all(evaluate(r, scope) for r in contract.get("requires", [])), name
            assert len(grid) == 3 and all(g >= 1 for g in grid)


def test_a_kernel_the_contract_refuses_is_unsupported(registry):
    small = next(k.name for k in registry.by_name.values() if k.group == "softmax_fp16"
                 and k.constants.get("BLOCK_SIZE", 1 << 20) < 4096)
    env = {"batch": 2, "n_cols": 4096, "in_stride": 4096, "out_stride": 4096}
    cands = dict(c for g in ["softmax_fp16"] for c in candidates.admitted(registry, g, env))
    assert small not in cands
    with pytest.raises(Unsupported, match="n_cols=4096"):
        candidates.prepare_choice(registry, cands, small, None, {"out": 0, "in": 0, **env}, env,
                                  "softmax fp16 batch=2 n_cols=4096")
