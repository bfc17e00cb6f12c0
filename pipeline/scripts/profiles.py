"""Build profiles: which of the scripts' kernels go into one build.

- `ort`: exactly the groups ONNX Runtime's ops look up (checked in ORT v1.22.0: the ROCm EP's Softmax
  launches `softmax_{fp32,fp16,bf16,fp64}`, GroupNorm and SkipGroupNorm `GroupNormTriton_{Silu,Pass}_
  {fp16,fp32}`; a CUDA build with Triton ops would use the same names). Every other entry would cost an
  ORT build archive bytes and header compile time, and ORT would never launch it. What ORT downloads.
- `full`: every group of every script: what the tritonforge runtime chooses among on GPU runners
  (tests, tuning, benchmarks).

Both come from the same scripts; `kernels.json` says which profile a build is. A full build lives
under `<out>/full/`, an ORT build at `<out>/` itself, so both can sit in one dist/.
"""

from __future__ import annotations

import re
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

PROFILES = ("ort", "full")
ORT_GROUPS = re.compile(r"softmax_(fp32|fp16|bf16|fp64)|GroupNormTriton_(Silu|Pass)_(fp16|fp32)")


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise PipelineError(f"--profile must be one of {', '.join(PROFILES)}, not '{profile}'")
    return profile


def parse_profiles(text: str) -> list[str]:
    """`ort`, `full` or `ort,full`."""
    profiles = [check_profile(p.strip()) for p in text.split(",") if p.strip()]
    if not profiles:
        raise PipelineError(f"--profile must name one of {', '.join(PROFILES)}")
    return list(dict.fromkeys(profiles))


def in_profile(group: str, profile: str) -> bool:
    return profile == "full" or ORT_GROUPS.fullmatch(group) is not None


def root(out: Path | str, profile: str) -> Path:
    """Where a profile's `<platform>/<arch>/` directories live under an output root."""
    return Path(out) / "full" if check_profile(profile) == "full" else Path(out)


def store_prefix(profile: str) -> str:
    """The same placement inside a published version: `full/<platform>/<arch>/` or `<platform>/<arch>/`."""
    return "full/" if check_profile(profile) == "full" else ""


def select(table, profile: str):
    """The kernels (and their groups' contracts) of `table` that belong to `profile`."""
    import dataclasses

    kernels = [k for k in table.kernels if in_profile(k.group, check_profile(profile))]
    if not kernels:
        raise PipelineError(f"no kernel of the '{profile}' profile in {', '.join(table.scripts)} (the ort profile "
                            "is ORT's own groups: softmax_<dtype>, GroupNormTriton_{Silu,Pass}_{fp16,fp32})")
    groups = {k.group for k in kernels}
    return dataclasses.replace(table, kernels=kernels,
                               contracts={g: c for g, c in table.contracts.items() if g in groups})
