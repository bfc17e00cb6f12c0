"""Candidates of a group by its launch contract, and launches prepared from role values.

The ops (softmax, GroupNorm) only know roles (`out`, `in`, `n_cols`, ...); this module maps them
onto each kernel's parameters, evaluates grid and `requires`, supplies `resident` for cooperative
kernels and the zeroed workspace a contract asks for.
"""

from __future__ import annotations

import re

from .expressions import evaluate
from .launch import PreparedLaunch, Unsupported


def groups_of(registry, pattern: str, roles: set[str], problem: set[str], first: str | None = None) -> list[str]:
    """The groups an op can launch: named by `pattern` (a regular expression), with a contract that speaks
    only of the op's argument roles and problem variables. In table order, except that `first` (ORT's
    own group) comes first and a correctness fallback (`"fallback": true`) after the rest."""
    known = []
    for group in registry.by_group:
        contract = registry.artifacts.contract(group)
        if (re.fullmatch(pattern, group) and contract and set(contract["params"]) <= roles
                and set(contract["problem"]) <= problem):
            known.append((group != first, bool(contract.get("fallback")), group))
    return [group for *_, group in sorted(known, key=lambda k: k[:2])]


def _scope(registry, contract: dict, info, env: dict) -> dict:
    scope = {**env, **info.constants, "num_warps": info.num_warps}
    if "resident" in contract["problem"]:
        scope["resident"] = registry.kernel(info.name).resident
    return scope


def admitted(registry, group: str, env: dict) -> list[tuple[str, tuple]]:
    """(kernel name, grid) of every kernel of `group` whose contract admits the problem `env`."""
    out = []
    for info in registry.by_group[group]:
        grid = admits(registry, info, env)
        if grid is not None:
            out.append((info.name, grid))
    return out


def admits(registry, info, env: dict) -> tuple | None:
    """The grid of kernel `info` for the problem `env`, or None when its contract does not admit it."""
    contract = registry.artifacts.contract(info.group)
    scope = _scope(registry, contract, info, env)
    if all(evaluate(r, scope) for r in contract["requires"]):
        return tuple(evaluate(g, scope) for g in contract["grid"])
    return None


def prepare(registry, name: str, roles: dict, env: dict, grid) -> PreparedLaunch:
    """A launch of `name` with parameters filled by role (a workspace added when the contract asks)."""
    loaded = registry.kernel(name)
    contract = registry.artifacts.contract(loaded.info.group)
    scope = _scope(registry, contract, loaded.info, env)
    if "workspace" in contract:
        roles = {**roles, "ws": registry.workspace(evaluate(contract["workspace"], scope))}
    values = {p["name"]: roles[role] for p, role in zip(loaded.info.params, contract["params"])}
    cluster = tuple(evaluate(d, scope) for d in contract["cluster"]) if "cluster" in contract else None
    return loaded.prepare(values, grid, cooperative=contract.get("cooperative", False), cluster=cluster)


def prepare_choice(registry, cands: dict, kernel: str | None, tuned: str | None, roles: dict, env: dict,
                   what: str) -> PreparedLaunch:
    """`kernel` when named (Unsupported if it cannot run this). Otherwise the tuned choice, then every
    candidate in table order: the first that prepares wins, so a kernel that these very pointers rule
    out (16-byte alignment) or the device cannot hold gives way to the next."""
    if not cands:
        raise Unsupported(f"no kernel admits {what}")
    if kernel is not None:
        if kernel not in cands:
            raise Unsupported(f"{kernel} does not admit {what}")
        return prepare(registry, kernel, roles, env, cands[kernel])
    order = ([tuned] if tuned in cands else []) + [name for name in cands if name != tuned]
    reasons = []
    for name in order:
        try:
            return prepare(registry, name, roles, env, cands[name])
        except Unsupported as why:
            reasons.append(str(why))
    raise Unsupported(f"no kernel can run {what}: {'; '.join(reasons[:3])}")


__all__ = ["admits", "admitted", "groups_of", "prepare", "prepare_choice", "Unsupported"]
