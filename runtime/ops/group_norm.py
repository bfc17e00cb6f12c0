"""GroupNorm (NHWC, optional skip / bias / add_out / SiLU) choosing among every kernel whose group
contract it knows: ORT's own groups `GroupNormTriton_{Silu|Pass}_<dtype>` first (ORT's rules:
BLOCK_SIZE is the next power of two of channels per group, HW_SIZE divides H*W, the SiLU flag
matches), then any group named `GroupNorm<Family>_{Silu|Pass}_<dtype>` whose contract speaks only of
these roles and problem variables, in table order, a correctness fallback (`"fallback": true`) last. A
new family needs no change here."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import candidates as contract_launch
from .. import zoo
from ..launch import PreparedLaunch
from ..memory import DeviceArray, element_size, to_storage
from ..problem import RotatingSetup
from ..reference import mismatch, quantize
from ..tune_cache import lookup_signature
from . import Tuning

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


# ---- the float64 reference, the tuning problem and its GPU setup ----------------------------------

def group_norm_ref(x64: np.ndarray, gamma: np.ndarray, beta: np.ndarray, groups: int, eps: float, silu: bool,
                   skip64: np.ndarray | None = None, bias64: np.ndarray | None = None):
    """float64 GroupNorm over NHWC x (n, h, w, c); skip is (n, h, w, c) or broadcast (n, c). Returns (y, sum)."""
    n, h, w, c = x64.shape
    a = x64.copy()
    if skip64 is not None:
        a = a + (skip64.reshape(n, 1, 1, c) if skip64.size == n * c else skip64)
    if bias64 is not None:
        a = a + bias64.reshape(1, 1, 1, c)
    g = a.reshape(n, h * w, groups, c // groups)
    mean = g.mean(axis=(1, 3), keepdims=True)
    var = g.var(axis=(1, 3), keepdims=True)
    y = ((g - mean) / np.sqrt(var + eps)).reshape(n, h, w, c) * gamma + beta
    if silu:
        y = y / (1 + np.exp(-y))
    return y, a


def group_norm_mismatch(y: np.ndarray, ref: np.ndarray, dtype: str) -> str | None:
    """GroupNorm outputs are O(1) after normalisation: the log-softmax tolerance (an absolute term
    of a few storage-type roundings) fits them."""
    return mismatch(y, ref, dtype, log=True)


@dataclass(frozen=True)
class GroupNormProblem:
    dtype: str
    n: int
    hw: int
    c: int
    groups: int = 32
    silu: bool = True
    eps: float = 1e-5  # not part of ORT's signature: the time does not depend on it

    @property
    def op_key(self) -> str:
        return f"group_norm_{'silu' if self.silu else 'pass'}_{self.dtype}"

    @property
    def params_signature(self) -> str:
        """ORT's GroupNormNHWCTunableParams::Signature() (no skip, no bias: what is tuned here)."""
        return signature(self.n, self.hw, self.c, self.groups, self.silu, 0, False, 0)

    @property
    def bytes_moved(self) -> int:
        """One read of x and one write of y."""
        return 2 * self.n * self.hw * self.c * element_size(self.dtype)

    def setup(self, registry, timer, rng: np.random.Generator) -> GroupNormSetup:
        return GroupNormSetup(registry, timer, self, rng)


# Past this many values a GroupNorm is checked on sampled pixels (every channel of each), against
# float64 statistics of every group: a full float64 reference of a VAE decoder's 2 x 1024 x 1024 x 256
# takes minutes and tens of GB.
FULL_CHECK_VALUES = 1 << 24
SAMPLED_PIXELS = 1024


class GroupNormSetup(RotatingSetup):
    """GroupNorm without skip or bias (ORT's common case), gamma/beta random, every output checked (on
    large tensors, sampled pixels: the first and last of each image and random ones between)."""

    def __init__(self, registry, timer, problem: GroupNormProblem, rng: np.random.Generator):
        self.p = problem
        self.op = GroupNorm(registry, problem.dtype, problem.silu)
        self.ort_group = self.op.group
        super().__init__(registry, timer, problem.n * problem.hw * problem.c * element_size(problem.dtype),
                         ("in", "out"))
        backend = registry.backend
        n, hw, c = problem.n, problem.hw, problem.c
        x = rng.standard_normal((n * hw, c), dtype=np.float32)
        x *= np.float32(rng.uniform(0.5, 4))
        x += np.float32(rng.uniform(-2, 2))
        self.fill_slots("in", np.ascontiguousarray(to_storage(x, problem.dtype)))
        gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
        beta = rng.uniform(-0.5, 0.5, c).astype(np.float32)
        self.gamma, self.beta = backend.alloc(4 * c), backend.alloc(4 * c)
        backend.copy_htod(self.gamma, gamma.ctypes.data, 4 * c)
        backend.copy_htod(self.beta, beta.ctypes.data, 4 * c)
        if n * hw * c <= FULL_CHECK_VALUES:
            self.check_rows = None
            x4 = quantize(x, problem.dtype).reshape(n, hw, 1, c)
            self.reference, _ = group_norm_ref(x4, gamma, beta, problem.groups, problem.eps, problem.silu)
        else:
            self.check_rows, self.reference = sampled_reference(x, gamma, beta, problem, rng)

    def candidates(self) -> list[str]:
        p = self.p
        return [name for name, _ in self.op.candidates(p.n, p.hw, p.c, p.groups)]

    def _prepare(self, name: str):
        p = self.p
        return self.op.prepare(out=self.base["out"], inp=self.base["in"], gamma=self.gamma, beta=self.beta, n=p.n,
                               hw=p.hw, c=p.c, groups=p.groups, eps=p.eps, kernel=name)

    def check(self, name: str) -> str | None:
        self.registry.backend.memset(self.base["out"], 0xFF, self.tensor_bytes)
        self.launch(name)()
        self.registry.backend.synchronize()
        got = self.read_slot0("out", self.p.n * self.p.hw, self.p.c, self.check_rows)
        return group_norm_mismatch(got, self.reference.reshape(got.shape), self.p.dtype)

    def free(self) -> None:
        super().free()
        self.registry.backend.free(self.gamma)
        self.registry.backend.free(self.beta)


def sampled_reference(x: np.ndarray, gamma, beta, p: GroupNormProblem, rng, chunk: int = 1 << 16):
    """(rows, float64 reference at those rows) of x (n * hw, c): every group's mean and variance in
    float64 over all of its values (chunk by chunk), the output at sampled pixels of every image."""
    cpg = p.c // p.groups
    total = np.zeros((p.n, p.groups))
    total_sq = np.zeros((p.n, p.groups))
    for image in range(p.n):
        for start in range(0, p.hw, chunk):
            rows = slice(image * p.hw + start, image * p.hw + min(start + chunk, p.hw))
            # fp16 values and their squares are exact in float32: half the bytes of float64 copies
            q = x[rows].astype(np.float16).astype(np.float32) if p.dtype == "fp16" else quantize(x[rows], p.dtype)
            # per channel first (a reduction over contiguous rows), then per group
            total[image] += q.sum(axis=0, dtype=np.float64).reshape(p.groups, cpg).sum(axis=1)
            total_sq[image] += np.square(q).sum(axis=0, dtype=np.float64).reshape(p.groups, cpg).sum(axis=1)
    count = p.hw * cpg
    mean = total / count
    rstd = 1.0 / np.sqrt(np.maximum(total_sq / count - mean * mean, 0.0) + p.eps)
    edge = min(64, p.hw)
    rows = []
    for image in range(p.n):
        picked = {*range(edge), *range(p.hw - edge, p.hw), *rng.choice(p.hw, min(p.hw, SAMPLED_PIXELS), False)}
        rows += [image * p.hw + r for r in sorted(picked)]
    rows = np.array(rows)
    q = quantize(x[rows], p.dtype).reshape(len(rows), p.groups, cpg)
    image = rows // p.hw
    y = ((q - mean[image][:, :, None]) * rstd[image][:, :, None]).reshape(len(rows), p.c) * gamma + beta
    if p.silu:
        y = y / (1 + np.exp(-y))
    return rows, y


def default_shapes() -> list[tuple[int, int, int, int]]:
    """(n, hw, c, groups) of every GroupNorm of the model zoo: SD 1.5 / SDXL UNets and VAE decoders, batch
    1 and 2 (with or without SiLU is the tune key's)."""
    return list(dict.fromkeys(p[:4] for p in zoo.group_norm_problems()))


TUNING = Tuning(
    family="group_norm",
    keys={"group_norm_silu": {"silu": True}, "group_norm_pass": {"silu": False}},
    shape_fields=("n", "hw", "c", "groups"),
    default_shapes=default_shapes,
    problem=lambda dtype, shape, silu: GroupNormProblem(dtype, *shape, silu=silu),
    # ORT's GroupNorm op registers its Pass group, then (SiLU fused) its Silu group
    ort_groups={r"group_norm_pass_(fp32|fp16)": lambda dt: [f"GroupNormTriton_Pass_{dt}"],
                r"group_norm_silu_(fp32|fp16)": lambda dt: [f"GroupNormTriton_Pass_{dt}",
                                                            f"GroupNormTriton_Silu_{dt}"]},
)
