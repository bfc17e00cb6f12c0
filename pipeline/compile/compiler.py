"""Compile one table entry for one target with Triton 3.5 to 3.9 (ASTSource + GPUTarget; what differs
between them: triton_api.py), no GPU needed.

`compile_job` runs in worker processes: it re-loads the script by path (JIT functions do not pickle),
compiles, and returns the binary plus everything the manifest needs about it.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tritonforge.pipeline.compile import triton_api
from tritonforge.pipeline.compile.targets import parse_target
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.scripts import abi

from tritonforge.atomic import write_text

_MODULES: dict[str, object] = {}  # per worker process: script path -> loaded module


@dataclass(frozen=True)
class CompileJob:
    script: str
    script_index: int
    entry_index: int
    name: str
    target: str  # Target.spec()
    key: str


def triton_signature(spec) -> tuple[dict, dict, dict]:
    """(signature, constexprs, attrs) for ASTSource, from a validated KernelSpec."""
    sig, attrs = {}, {}
    for i, (name, p) in enumerate(zip(spec.param_names, spec.params)):
        sig[name] = p.type
        if p.divisibility:
            attrs[(i,)] = [["tt.divisibility", p.divisibility]]
    for name in spec.constants:
        sig[name] = "constexpr"
    return sig, dict(spec.constants), attrs


def _spec_for(job: CompileJob):
    from tritonforge.pipeline.scripts.table import call_table, load_module, validate_entry

    module = _MODULES.get(job.script)
    if module is None:
        module = load_module(Path(job.script), job.script_index)
        _MODULES[job.script] = module
    entry = call_table(module, Path(job.script))[job.entry_index]
    spec = validate_entry(entry, Path(job.script), job.entry_index)
    if spec.name != job.name:
        raise PipelineError("function table changed while compiling", script=job.script, kernel=job.name)
    return spec


PTX_TARGET = re.compile(r"^(\.target\s+)sm_(\d+)(a?)\b", re.M)


def portable_ptx(ptx: str, where: str, checks: Path | None = None) -> tuple[str | None, str, str]:
    """(PTX a newer GPU can JIT-compile, its target, why not when None). Triton writes `.target sm_90a` for
    sm_90+, PTX no other GPU may load; retargeted to `sm_90` it is kept only if ptxas still assembles it
    (no sm_90a-only instruction in it). `checks`: a directory keeping ptxas's verdict per PTX text and
    ptxas, so the same kernel merged again is not assembled again."""
    import json

    m = PTX_TARGET.search(ptx)
    if m is None:
        return None, "", f"{where}: no .target line in Triton's PTX"
    target = f"sm_{m.group(2)}"
    if not m.group(3):
        return ptx, target, ""  # already portable, and ptxas just made the cubin from it
    text = PTX_TARGET.sub(lambda mm: f"{mm.group(1)}sm_{mm.group(2)}", ptx, count=1)
    tool = triton_api.ptxas(int(m.group(2)))
    entry = None
    if checks is not None:
        entry = Path(checks) / (hashlib.sha256(f"{tool}\0{target}\0{text}".encode()).hexdigest() + ".json")
        try:
            why = json.loads(entry.read_text())["why"]
            return (None if why else text), target, why
        except (OSError, ValueError, KeyError):
            pass
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(text)
        f.flush()
        proc = subprocess.run([tool, "--gpu-name", target, f.name, "-o", "/dev/null"], capture_output=True, text=True)
    why = ""
    if proc.returncode:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no message"]
        why = f"the PTX needs {target}a: ptxas for {target} says: {last[0]}"
    if entry is not None:
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            write_text(entry, json.dumps({"why": why}))
        except OSError:
            pass  # a cache that cannot be written only costs time
    return (None if why else text), target, why


class _TargetDriver:
    """Stands in for Triton's active driver while one kernel compiles, so that a kernel's
    `triton.language.target_info` checks (is_cuda(), cuda_capability_geq(9, 0), ...) see the target being
    compiled for, not whatever GPU (usually none) the build machine has."""

    def __init__(self, target):
        self._target = target

    def get_current_target(self):
        return self._target

    def __getattr__(self, name):
        raise RuntimeError(f"compiling ahead of time: no GPU driver to ask for {name!r}")


@contextmanager
def _compiling_for(gpu_target):
    from triton.runtime import driver

    previous = driver._active  # pinned Triton: DriverConfig keeps the active driver here
    driver.set_active(_TargetDriver(gpu_target))
    try:
        yield
    finally:
        driver._active = previous


def compile_spec(spec, target) -> tuple[bytes, dict]:
    """Compile; return (binary, record). Errors name the script, kernel and target."""
    import triton
    from triton.compiler import ASTSource

    signature, constexprs, attrs = triton_signature(spec)
    t0 = time.perf_counter()
    try:
        src = ASTSource(fn=spec.func, signature=signature, constexprs=constexprs, attrs=attrs)
        gpu_target = target.to_triton()
        with _compiling_for(gpu_target):
            kernel = triton.compile(src, target=gpu_target, options=triton_api.compile_options(dict(spec.options)))
    except Exception as exc:
        msg = str(exc).strip().splitlines()
        detail = "\n".join(msg[-12:]) if msg else type(exc).__name__
        raise PipelineError(f"triton failed to compile: {type(exc).__name__}: {detail}",
                            script=spec.script, kernel=spec.name, target=target.arch_name) from None
    seconds = time.perf_counter() - t0
    md = kernel.metadata
    ext = target.binary_ext
    binary = kernel.asm.get(ext)
    if not binary:
        raise PipelineError(f"triton produced no {ext}", script=spec.script, kernel=spec.name,
                            target=target.arch_name)
    ptx = {}
    if target.backend == "cuda":
        declared = abi.ptx_param_slots(kernel.asm["ptx"], md.name)
        m = PTX_TARGET.search(kernel.asm["ptx"])
        # The PTX as Triton wrote it (sm_90a and up: arch-specific); a multi-arch merge makes the newest
        # arch's portable (portable_ptx), so only the PTX that ships pays for the ptxas check.
        if m:
            arch = f"sm_{m.group(2)}{m.group(3)}"
            ptx = {"binary_arch": arch, "ptx": kernel.asm["ptx"], "ptx_target": arch, "ptx_note": ""}
        else:
            ptx = {"binary_arch": target.arch_name, "ptx": None, "ptx_target": "",
                   "ptx_note": f"{spec.name}: no .target line in Triton's PTX"}
    else:
        declared, _ = abi.amdgpu_arg_slots(kernel.asm["amdgcn"], md.name)
    try:
        layout = abi.describe_layout(list(spec.params), declared, spec.name)
    except PipelineError as exc:
        raise PipelineError(exc.detail, script=spec.script, kernel=spec.name,
                            target=target.arch_name) from None
    scratch = {
        "global_scratch_size": int(getattr(md, "global_scratch_size", 0) or 0),
        "global_scratch_align": int(getattr(md, "global_scratch_align", 1) or 1),
        "profile_scratch_size": int(getattr(md, "profile_scratch_size", 0) or 0),
        "profile_scratch_align": int(getattr(md, "profile_scratch_align", 1) or 1),
    }
    unsupported = []
    clusters = triton_api.cluster_dims(md)
    if md.num_ctas != 1 or clusters != (1, 1, 1):
        unsupported.append(f"clusters (num_ctas={md.num_ctas}, cluster_dims={clusters})")
    if getattr(md, "launch_cooperative_grid", False):
        unsupported.append("cooperative launch")
    if getattr(md, "launch_pdl", False):
        unsupported.append("programmatic dependent launch")
    if unsupported:
        raise PipelineError(f"needs {', '.join(unsupported)}, which ORT's launcher cannot do",
                            script=spec.script, kernel=spec.name, target=target.arch_name)
    record = {
        "func_name": md.name,
        "num_warps": int(md.num_warps),
        "num_stages": int(md.num_stages),
        "warp_size": int(md.warp_size),
        "shared": int(md.shared),
        "layout": layout,
        **scratch,
        "triton_version": triton.__version__,
        "sha256": hashlib.sha256(binary).hexdigest(),
        "size": len(binary),
        "compile_seconds": round(seconds, 4),
        "binary_arch": target.arch_name,  # CUDA: the cubin's own arch (sm_90a), and Triton's PTX
        **ptx,
    }
    return binary, record


def compile_job(job: CompileJob) -> tuple[CompileJob, bytes | None, dict | str]:
    """Worker entry: never raises, so one bad kernel does not hide the others' results."""
    try:
        spec = _spec_for(job)
        binary, record = compile_spec(spec, parse_target(job.target))
        return job, binary, record
    except PipelineError as exc:
        return job, None, str(exc)
    except Exception as exc:  # a crash inside Triton itself
        return job, None, (f"{job.script}: kernel '{job.name}': target {job.target}: "
                           f"{type(exc).__name__}: {exc}")
