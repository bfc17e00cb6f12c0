"""GPU targets: parsing `cuda:90`, `sm_90`, `hip:gfx942`, `gfx1100:32`, and what each implies."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tritonforge.pipeline.errors import PipelineError

# Architectures this pipeline is known to compile for with the pinned Triton.
CUDA_ARCHS = (75, 80, 86, 89, 90, 100, 103, 120, 121)
ROCM_ARCHS = ("gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1101", "gfx1200", "gfx1201")

EM_CUDA = 190
EM_AMDGPU = 224


@dataclass(frozen=True, order=True)
class Target:
    backend: str  # "cuda" or "hip" (Triton's backend names)
    arch: str  # "90" for CUDA (compute capability), "gfx942" for ROCm
    warp_size: int

    @property
    def platform(self) -> str:
        return "cuda" if self.backend == "cuda" else "rocm"

    @property
    def arch_name(self) -> str:
        """Directory and display name: sm_90, gfx942."""
        return f"sm_{self.arch}" if self.backend == "cuda" else self.arch

    @property
    def binary_ext(self) -> str:
        return "cubin" if self.backend == "cuda" else "hsaco"

    @property
    def elf_machine(self) -> int:
        return EM_CUDA if self.backend == "cuda" else EM_AMDGPU

    @property
    def max_threads_per_block(self) -> int:
        return 1024

    def spec(self) -> str:
        """The canonical `backend:arch:warp` form, accepted back by parse_target."""
        return f"{self.backend}:{self.arch}:{self.warp_size}"

    def to_triton(self):
        from triton.backends.compiler import GPUTarget

        arch = int(self.arch) if self.backend == "cuda" else self.arch
        return GPUTarget(self.backend, arch, self.warp_size)

    def __str__(self) -> str:
        return self.arch_name


def _rocm_default_warp(arch: str) -> int:
    # CDNA (gfx9xx) runs wave64; RDNA (gfx10xx and later) runs wave32 by default.
    return 64 if arch.startswith("gfx9") else 32


def parse_target(text: str) -> Target:
    """Parse one target. Accepts BACKEND:ARCH[:WARP] (cuda:90, hip:gfx942) and short forms (sm_90, gfx942)."""
    raw = text.strip()
    parts = raw.split(":")
    if len(parts) == 1:
        m = re.fullmatch(r"sm_?(\d+)a?", raw)
        if m:
            parts = ["cuda", m.group(1)]
        elif raw.startswith("gfx"):
            parts = ["hip", raw]
        else:
            raise PipelineError(f"unknown target '{text}' (expected e.g. sm_90, cuda:90, gfx942, hip:gfx942)")
    if len(parts) not in (2, 3):
        raise PipelineError(f"unknown target '{text}' (expected BACKEND:ARCH[:WARP])")
    backend, arch = parts[0].lower(), parts[1].lower()
    if backend in ("rocm", "amd"):
        backend = "hip"
    if backend == "cuda":
        arch = arch.removeprefix("sm_").removeprefix("sm").rstrip("a")
        if not arch.isdigit() or int(arch) not in CUDA_ARCHS:
            known = ", ".join(f"sm_{a}" for a in CUDA_ARCHS)
            raise PipelineError(f"unknown CUDA target '{text}' (known: {known})")
        default_warp = 32
    elif backend == "hip":
        if arch not in ROCM_ARCHS:
            raise PipelineError(f"unknown ROCm target '{text}' (known: {', '.join(ROCM_ARCHS)})")
        default_warp = _rocm_default_warp(arch)
    else:
        raise PipelineError(f"unknown backend '{parts[0]}' in target '{text}' (expected cuda or hip)")
    warp = default_warp
    if len(parts) == 3:
        if not parts[2].isdigit() or int(parts[2]) not in (32, 64):
            raise PipelineError(f"bad warp size in target '{text}' (expected 32 or 64)")
        warp = int(parts[2])
        if backend == "cuda" and warp != 32:
            raise PipelineError(f"bad warp size in target '{text}': CUDA warps are 32 threads")
        if backend == "hip" and arch.startswith("gfx9") and warp != 64:
            raise PipelineError(f"bad warp size in target '{text}': CDNA ({arch}) runs wave64 only")
    return Target(backend, arch, warp)


def parse_targets(items, platform: str | None = None) -> list[Target]:
    """Parse a comma-separated string or a list; check each belongs to `platform` when given."""
    if isinstance(items, str):
        items = [s for s in items.split(",") if s.strip()]
    targets = []
    for item in items:
        t = parse_target(str(item))
        if platform is not None and t.platform != platform:
            raise PipelineError(f"target '{item}' is not a {platform} target")
        if t not in targets:
            targets.append(t)
    if not targets:
        raise PipelineError("no target given")
    return targets


def detect_local_target() -> Target | None:
    """The target of the GPU in this machine, if Triton sees one; None on a GPU-less machine."""
    try:
        from triton.runtime import driver

        t = driver.active.get_current_target()
    except Exception:
        return None
    return parse_target(f"{t.backend}:{t.arch}:{t.warp_size}")
