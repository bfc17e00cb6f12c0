"""Which GPU's measurements decide the rewrite's library-or-ORT choices.

The shipped tables are one data file, choices.json beside this module (written by benchmarks/choices.py from
benchmarks/results/results.csv; do not edit): per table (softmax, attention, linear, ...), per GPU that measured
it, the library's speed-up over the export's nodes or ORT's own op, {dtype: {form: speed-up}}. The rewrite reads
them through `table(name)` in the scope `deciding(gpu)` opens: the GPU the user names (`--gpu`), else the one
this machine shows (nvidia-smi), else none. A table takes each entry (a dtype's form, row length or class of
shape) from the GPU nearest that one that measured it: the same model, then the same architecture, then the
nearest architecture (newer first); with no GPU known, in the order DEFAULT_ORDER gives. The scope records
which GPU's rows each table it was asked for used, for the report.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import TritonforgeError

DATA = Path(__file__).with_name("choices.json")
# with no GPU named or seen: the GPUs whose rows decide, first first (the tables were first measured there)
DEFAULT_ORDER = ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
# architectures, oldest first, and the model names (as nvidia-smi spells them, in part) of each
ARCHS = (
    ("volta", (r"V100", r"TITAN V")),
    ("turing", (r"T4", r"RTX 20\d\d", r"TITAN RTX", r"Quadro RTX")),
    ("ampere", (r"A100", r"A800", r"A10G?", r"A16", r"A30", r"A40", r"A2\b", r"RTX A\d+", r"RTX 30\d\d")),
    ("ada", (r"L4\b", r"L40S?", r"L20", r"RTX 40\d\d", r"RTX \d+ Ada")),
    ("hopper", (r"GH200", r"H100", r"H200", r"H800", r"H20\b")),
    ("blackwell", (r"GB200", r"GB300", r"B200", r"B300", r"B100", r"RTX 50\d\d", r"RTX PRO \d+ Blackwell")),
)


class UnknownGpu(TritonforgeError, ValueError):
    pass


@dataclass(frozen=True)
class Table:
    """One table for the GPU in scope: `speedup` (and `library`, the second table a few patterns keep) per dtype;
    `devices[dtype]` the nearest GPU that measured the dtype, `device` those GPUs in a line."""

    name: str
    speedup: dict
    library: dict
    devices: dict  # dtype -> the GPU whose rows it took

    @property
    def device(self) -> str:
        said = list(dict.fromkeys(self.devices.values()))
        return ", else ".join(said) if said else "no GPU"


def model_of(gpu: str) -> tuple[int, str] | None:
    """(architecture index in ARCHS, the model's name as matched) of a GPU name, or None when it is none known."""
    for index, (_, models) in enumerate(ARCHS):
        for model in models:
            m = re.search(model, gpu, re.I)
            if m:
                return index, m.group(0).upper()
    return None


def check_gpu(gpu: str) -> str:
    """`gpu` (a name the user gave) when it is one of a known architecture; UnknownGpu naming them otherwise."""
    if model_of(gpu) is None:
        known = "; ".join(f"{arch}: " + ", ".join(m.replace("\\d", "N").replace("\\b", "").replace("?", "")
                                                  for m in models) for arch, models in ARCHS)
        raise UnknownGpu(f"--gpu '{gpu}' is no GPU the rewrite knows the architecture of ({known})")
    return gpu


def order(devices, gpu: str | None) -> list[str]:
    """`devices` (those with rows), nearest `gpu` first (module docstring); DEFAULT_ORDER's first without one."""
    def default(d: str) -> tuple:
        return (DEFAULT_ORDER.index(d) if d in DEFAULT_ORDER else len(DEFAULT_ORDER), d)

    want = model_of(gpu) if gpu else None
    if want is None:
        return sorted(devices, key=default)

    def near(d: str) -> tuple:
        have = model_of(d)
        if have is None:
            return (2, 99, 0, *default(d))
        other_model = have[1] != want[1]
        return (int(other_model), abs(have[0] - want[0]), -have[0], *default(d))

    return sorted(devices, key=near)


@functools.cache
def shipped() -> dict:
    """choices.json's tables: {table: {device: {"SPEEDUP": {dtype: {...}}, ["LIBRARY": ...]}}}, its numeric keys
    (softmax's row lengths) as ints."""
    def keys(v):
        if isinstance(v, dict):
            return {int(k) if k.isdigit() else k: keys(x) for k, x in v.items()}
        return v

    try:
        doc = json.loads(DATA.read_text())
    except (OSError, ValueError) as exc:
        raise TritonforgeError(f"{DATA}: the rewrite's measured tables cannot be read: {exc}") from None
    return {name: keys(by_device) for name, by_device in doc["tables"].items()}


_scope: contextvars.ContextVar = contextvars.ContextVar("tritonforge_choices", default=None)


@dataclass
class Scope:
    gpu: str | None  # the GPU the choices are for, or None
    how: str  # "named", "detected" or "none"
    used: dict  # table -> its `device` line, as consulted


@functools.lru_cache(maxsize=1)
def detect_gpu() -> str | None:
    """The first GPU nvidia-smi lists here, or None (no nvidia-smi, no GPU, or it does not answer); asked once."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=15)
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []
    return names[0] if names else None


@contextlib.contextmanager
def deciding(gpu: str | None = None, detect: bool = True):
    """The scope in which table() answers for `gpu` (checked), else the GPU this machine shows (when `detect`),
    else none; yields its Scope."""
    if gpu:
        scope = Scope(check_gpu(gpu), "named", {})
    else:
        seen = detect_gpu() if detect else None
        scope = Scope(seen, "detected" if seen else "none", {})
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def table(name: str) -> Table:
    """Table `name` for the GPU in scope (none outside deciding()): each entry (a dtype's form, row length or class
    of shape) from the nearest GPU that measured it."""
    scope = _scope.get()
    by_device = shipped().get(name, {})
    merged: dict[str, dict] = {"SPEEDUP": {}, "LIBRARY": {}}
    devices: dict[str, str] = {}
    for device in order(by_device, scope.gpu if scope else None):
        for key, into in merged.items():
            for dtype, entries in by_device[device].get(key, {}).items():
                for form, value in entries.items():
                    if form not in into.setdefault(dtype, {}):
                        into[dtype][form] = value
                        devices.setdefault(dtype, device)
    t = Table(name, merged["SPEEDUP"], merged["LIBRARY"], devices)
    if scope is not None:
        scope.used[name] = t.device
    return t
