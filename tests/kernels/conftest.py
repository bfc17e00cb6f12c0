"""What the kernel tests share: a script's table, and whether a kernel's contract admits a problem."""

from __future__ import annotations

import pytest

pytest.importorskip("triton", reason="kernel scripts import triton")

from tritonforge.pipeline.scripts.table import load_table  # noqa: E402
from tritonforge.runtime.expressions import evaluate  # noqa: E402

UNET = [(n, h, c) for n in (1, 2) for h in (8, 16, 32, 64) for c in (320, 640, 1280)]  # Stable Diffusion's


@pytest.fixture(scope="module")
def table(request, root):
    """The table of the script the test module is named for (tests/kernels/test_<script>.py)."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    return load_table([root / "kernels" / f"{name}.py"])


def scope(kernel, **problem) -> dict:
    return {**problem, **kernel.constants, "num_warps": kernel.num_warps}


def admits(table, kernel, **problem) -> bool:
    return all(evaluate(r, scope(kernel, **problem)) for r in table.contracts[kernel.group]["requires"])


def admitted(table, group, **problem) -> list:
    return [k for k in table.kernels if k.group == group and admits(table, k, **problem)]


def grid(table, kernel, **problem) -> list[int]:
    return [evaluate(g, scope(kernel, **problem)) for g in table.contracts[kernel.group]["grid"]]


def ptx(kernel, arch: str = "sm_90") -> str:
    """The kernel's PTX, compiled here (no GPU)."""
    import triton
    from triton.compiler import ASTSource
    from tritonforge.pipeline.compile.compiler import triton_signature
    from tritonforge.pipeline.compile.targets import parse_target

    sig, constexprs, attrs = triton_signature(kernel)
    src = ASTSource(fn=kernel.func, signature=sig, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=parse_target(arch).to_triton(), options=dict(kernel.options)).asm["ptx"]


def global_accesses(table, name: str) -> set[str]:
    """The kinds of global load and store in kernel `name`'s sm_90 PTX: one element (`ld.global.b16`) or a
    vector (`ld.global.v4.b32`)."""
    import re

    return set(re.findall(r"(?:ld|st)\.global[.\w]*", ptx(next(k for k in table.kernels if k.name == name))))


def matched_in_interpreter(table) -> list:
    """The kernels numerics_check picks from `table` (a few per group), once each has matched float64 in Triton's
    interpreter (asserted: none skipped, none off)."""
    from tritonforge.pipeline.builds.numerics_check import run_specs, select

    kernels, skipped = select(table)
    assert not skipped, skipped
    result = run_specs(kernels)
    assert result["passed"] and not [c for c in result["checked"] if c["error"]], result["checked"]
    return kernels
