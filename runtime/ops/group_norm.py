"""GroupNorm (NHWC, optional skip / bias / add_out / SiLU) choosing among every kernel whose group
contract it knows: ORT's own groups `GroupNormTriton_{Silu|Pass}_<dtype>` first (ORT's rules:
BLOCK_SIZE is the next power of two of channels per group, HW_SIZE divides H*W, the SiLU flag
matches), then any group named `GroupNorm<Family>_{Silu|Pass}_<dtype>` whose contract speaks only of
these roles and problem variables, in table order, a correctness fallback (`"fallback": true`) last. A
new family needs no change here."""

from __future__ import annotations

import numpy as np

from .. import candidates as contract_launch
from ..launch import PreparedLaunch
from ..memory import DeviceArray
from ..tune_cache import lookup_signature

ROLES = {"in", "skip", "bias", "out", "add_out", "gamma", "beta", "ws", "hw", "c", "c_per_group", "groups", "eps",
         "has_skip", "has_bias", "broadcast_skip"}
PROBLEM = {"n", "hw", "c", "groups", "c_per_group", "silu", "resident"}


class GroupNorm:
    def __init__(self, registry, dtype: str, silu: bool, tune_cache: dict | None = None):
        """tune_cache: a validated cache (runtime.tune_cache.load_cache) whose choices replace the default."""
        self.registry, self.dtype, self.silu, self.tune_cache = registry, dtype, silu, tune_cache
        act = "Silu" if silu else "Pass"
        self.group = f"GroupNormTriton_{act}_{dtype}"  # ORT's own
        self.groups = contract_launch.groups_of(registry, rf"GroupNorm[A-Za-z0-9]+_{act}_{dtype}", ROLES, PROBLEM,
                                                first=self.group)
        if not self.groups:
            raise LookupError(f"no {self.group} kernels in {registry.artifacts.path}")
        self.op_key = f"group_norm_{act.lower()}_{dtype}"

    def _env(self, n: int, hw: int, c: int, groups: int) -> dict:
        if groups < 1 or c % groups:
            raise ValueError(f"{c} channels do not split into {groups} groups")
        return {"n": n, "hw": hw, "c": c, "groups": groups, "c_per_group": c // groups, "silu": int(self.silu)}

    def candidates(self, n: int, hw: int, c: int, groups: int) -> list[tuple[str, tuple]]:
        """(kernel name, grid) of every kernel whose contract admits the problem, ORT's group first."""
        env = self._env(n, hw, c, groups)
        return [c for group in self.groups for c in contract_launch.admitted(self.registry, group, env)]

    def prepare(self, *, out: int, inp: int, gamma: int, beta: int, n: int, hw: int, c: int, groups: int,
                eps: float = 1e-5, skip: int = 0, bias: int = 0, add_out: int = 0, broadcast_skip: bool = False,
                kernel: str | None = None) -> PreparedLaunch:
        """Pointers are device addresses (gamma/beta fp32); skip/bias/add_out 0 when absent."""
        if skip and not add_out:
            raise ValueError("a skip input needs an add_out buffer (the kernel writes input + skip + bias there)")
        cands = dict(self.candidates(n, hw, c, groups))
        tuned = None
        if kernel is None and self.tune_cache is not None:
            tuned = lookup_signature(self.tune_cache, self.op_key, signature(n, hw, c, groups, self.silu, skip,
                                                                              broadcast_skip, bias))
        env = self._env(n, hw, c, groups)
        roles = {**env, "in": inp, "skip": skip, "bias": bias, "out": out, "add_out": add_out, "gamma": gamma,
                 "beta": beta, "eps": eps, "has_skip": bool(skip), "has_bias": bool(bias),
                 "broadcast_skip": bool(broadcast_skip)}
        return contract_launch.prepare_choice(self.registry, cands, kernel, tuned, roles, env,
                                              f"{self.group} n={n} hw={hw} c={c} groups={groups}")


def signature(n: int, hw: int, c: int, groups: int, silu: bool, skip, broadcast_skip: bool, bias) -> str:
    """ORT's GroupNormNHWCTunableParams::Signature(): shape, then which options are on."""
    return (f"{n}_{hw}_{c}_{groups}_{'silu' if silu else 'pass'}_{'skip' if skip else 'noskip'}_"
            f"{'broadcast' if broadcast_skip else 'nobroadcast'}_{'bias' if bias else 'nobias'}")


def group_norm_numpy(registry, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, groups: int, dtype: str,
                     eps: float = 1e-5, silu: bool = False, skip: np.ndarray | None = None,
                     bias: np.ndarray | None = None, kernel: str | None = None):
    """Host convenience for x of shape (n, h, w, c). Returns (y, add_out or None); bf16 comes back as fp32."""
    n, h, w, c = x.shape
    backend = registry.backend
    hw = h * w
    bufs = {"inp": DeviceArray.from_numpy(backend, x.reshape(n * hw, c), dtype),
            "out": DeviceArray(backend, n * hw, c, dtype),
            "gamma": DeviceArray.from_numpy(backend, gamma.reshape(1, c), "fp32"),
            "beta": DeviceArray.from_numpy(backend, beta.reshape(1, c), "fp32")}
    broadcast = False
    if skip is not None:
        broadcast = skip.size == n * c
        bufs["skip"] = DeviceArray.from_numpy(backend, skip.reshape(n if broadcast else n * hw, c), dtype)
        bufs["add_out"] = DeviceArray(backend, n * hw, c, dtype)
    if bias is not None:
        bufs["bias"] = DeviceArray.from_numpy(backend, bias.reshape(1, c), dtype)
    try:
        for name in ("out", "add_out"):
            if name in bufs:
                bufs[name].fill_bytes(0xFF)  # poison: every element must be written
        GroupNorm(registry, dtype, silu).prepare(
            **{k: v.ptr for k, v in bufs.items()}, n=n, hw=hw, c=c, groups=groups, eps=eps,
            broadcast_skip=broadcast, kernel=kernel)()
        backend.synchronize()
        y = bufs["out"].to_numpy().reshape(n, h, w, c)
        add = bufs["add_out"].to_numpy().reshape(n, h, w, c) if "add_out" in bufs else None
        return y, add
    finally:
        for b in bufs.values():
            b.free()
