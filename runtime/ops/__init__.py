"""Ops, one module each. An op module holds the op (candidates picked from the registry by each group's
launch contract), its float64 reference, its tuning problem and that problem's GPU setup, and declares
what the tuner and ORT's export need of it as `TUNING`, a `Tuning`. The tuner, the tune CLI and the
export find every op module here: adding an op is a kernel script and one module in this package.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Tuning:
    """What tuning an op takes.

    family: the op's name for its shapes (`--shapes FAMILY=FILE`).
    keys: tune op name -> the problem's options, e.g. {"softmax": {"log": False}, "log_softmax": {...}}.
    shape_fields: what one line of a shapes file holds, e.g. ("batch", "n_cols").
    default_shapes: the model zoo's shapes of the op (runtime/zoo.py).
    problem: problem(dtype, shape, **options) -> a problem with op_key, params_signature, bytes_moved
        and setup(registry, timer, rng), which puts it on the GPU for checking and timing.
    ort_groups: tune-cache op key pattern (its group 1 the dtype) -> the Triton groups ORT's op for it
        registers, in order (the last is the one it launches); empty when ORT launches none.
    """

    family: str
    keys: dict[str, dict]
    shape_fields: tuple[str, ...]
    default_shapes: Callable[[], list[tuple[int, ...]]]
    problem: Callable[..., object]
    ort_groups: dict[str, Callable[[str], list[str]]] = field(default_factory=dict)


def tunings() -> list[Tuning]:
    """The `TUNING` of every op module of this package, in module name order."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if isinstance(getattr(module, "TUNING", None), Tuning):
            found.append(module.TUNING)
    return found


def tuning_of(key: str) -> Tuning:
    """The op whose tune keys hold `key`; KeyError naming every key there is."""
    for t in tunings():
        if key in t.keys:
            return t
    raise KeyError(f"unknown op '{key}': choose from {', '.join(tune_keys())}")


def tune_keys() -> list[str]:
    return [k for t in tunings() for k in t.keys]


def ort_registered_groups(op_key: str) -> list[str] | None:
    """The groups ORT's op for a tune-cache op key registers (None: ORT has no Triton op for it)."""
    for t in tunings():
        for pattern, groups in t.ort_groups.items():
            m = re.fullmatch(pattern, op_key)
            if m:
                return groups(m.group(1))
    return None
