"""The GPU half of a build's numerics: every kernel of a build, compiled code as shipped, against float64.

Each kernel runs once on the awkward problem its launch contract admits on this GPU (the same cases the
interpreter check uses: tritonforge.runtime.kernel_cases), launched the way the runtime launches it
(clusters, cooperative grids and workspaces included), outputs poisoned first so every element must be
written, and a kernel with a workspace must leave it zeroed. Inline-PTX, cluster and cooperative kernels,
which the interpreter cannot run, are checked here.

    python -m tritonforge.runtime.verify dist/full/cuda/sm_90 [--only REGEX] [--out verify.json]

prints a line per failing kernel and a summary, and exits 1 when any kernel fails or has no problem its
contract admits on this GPU.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import traceback

from . import candidates
from .kernel_cases import KernelSpec, case_for
from .memory import DeviceArray

POISON = 0xFF  # every float type reads 0xFF.. as NaN


def kernel_specs(registry):
    """(info, KernelSpec) of every kernel of the registry's build, group by group."""
    for group, infos in registry.by_group.items():
        contract = registry.artifacts.contract(group)
        for i, info in enumerate(infos):
            yield info, KernelSpec(info.name, group, info.constants, info.num_warps, contract or {}, i)


def check_kernel(registry, info, spec: KernelSpec, seed: int = 0) -> dict:
    """One kernel on this GPU: {name, group, problem, error} (error None when it matched float64)."""
    if not spec.contract:
        return {"name": info.name, "group": spec.group, "problem": None, "error": "no launch contract"}
    case = case_for(spec, lambda env: candidates.admits(registry, info, env) is not None, seed)
    if case is None:
        return {"name": info.name, "group": spec.group, "problem": None,
                "error": "no problem tried is admitted by its contract on this GPU"}
    backend, bufs = registry.backend, {}
    try:
        for role, (a, dt) in case.inputs.items():
            bufs[role] = DeviceArray.from_numpy(backend, a, dt)
        for role, ((rows, cols), dt) in case.outputs.items():
            bufs[role] = DeviceArray(backend, rows, cols, dt)
            bufs[role].fill_bytes(POISON)
        roles = {**case.scalars, **{role: b.ptr for role, b in bufs.items()}}
        grid = candidates.admits(registry, info, case.env)
        candidates.prepare(registry, info.name, roles, case.env, grid)()
        backend.synchronize()
        error = case.check({role: bufs[role].to_numpy() for role in case.outputs})
        if error is None and "workspace" in spec.contract and registry.workspace_nonzero_bytes():
            error = "left its workspace dirty (the next launch on this stream would read its sums)"
    except Exception:
        error = "raised " + traceback.format_exc(limit=-2).strip().splitlines()[-1]
    finally:
        for b in bufs.values():
            b.free()
    return {"name": info.name, "group": spec.group, "problem": case.label, "error": error}


def verify(registry, only: str | None = None, seed: int = 0, say=None) -> dict:
    """Every kernel of the registry (or those whose name matches `only`): {device, arch, triton, passed,
    checked: [...]}."""
    where = re.compile(only) if only else None
    checked, t0 = [], time.perf_counter()
    specs = [(info, spec) for info, spec in kernel_specs(registry) if not where or where.search(info.name)]
    for i, (info, spec) in enumerate(specs):
        checked.append(check_kernel(registry, info, spec, seed))
        if say and (checked[-1]["error"] or (i + 1) % 100 == 0 or i + 1 == len(specs)):
            r = checked[-1]
            say(f"[{time.perf_counter() - t0:5.0f} s] {i + 1}/{len(specs)}"
                + (f" FAIL {r['name']} {r['problem']}: {r['error']}" if r["error"] else ""))
    manifest = registry.artifacts.manifest
    return {"device": registry.backend.device_name, "arch": f"sm_{registry.backend.arch}",
            "triton": manifest.get("triton_version", "?"), "passed": bool(checked) and not any(
                c["error"] for c in checked), "checked": checked}


def summary_line(result: dict) -> str:
    failed = sum(bool(c["error"]) for c in result["checked"])
    return (f"{len(result['checked']) - failed} of {len(result['checked'])} kernels passed on {result['device']} "
            f"({result['arch']}, Triton {result['triton']}; every kernel of the build, compiled code, against "
            f"float64)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tritonforge.runtime.verify", description=__doc__.splitlines()[0])
    ap.add_argument("build", help="one arch's build: a directory with kernels.json (e.g. dist/full/cuda/sm_90)")
    ap.add_argument("--only", help="only the kernels whose name matches this regular expression")
    ap.add_argument("--out", help="write the result (JSON) here")
    args = ap.parse_args(argv)
    from tritonforge.errors import TritonforgeError

    from . import load_artifacts
    from .cuda import CudaBackend, driver_available
    from .registry import Registry

    ok, why = driver_available()
    if not ok:
        print(f"error: no usable NVIDIA GPU: {why}", file=sys.stderr)
        return 2
    try:
        registry = Registry(load_artifacts(args.build), CudaBackend(0))
    except TritonforgeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    result = verify(registry, args.only, say=lambda line: print(line, flush=True))
    print(summary_line(result))
    if args.out:
        from tritonforge.atomic import write_text

        write_text(args.out, json.dumps(result, indent=1) + "\n")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
