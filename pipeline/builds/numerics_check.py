"""The host half of a build's numerics: kernels run by Triton's interpreter against float64, no GPU.

Which kernels: the first of every group the interpreter can run (and the first of each code path a
constant selects: GroupNorm's FLAT pass 1, a VEC of its own), each on the awkward problem its launch
contract admits (tritonforge.runtime.kernel_cases). The interpreter runs a kernel's programs one at a
time on the host, so kernels with inline PTX, thread-block clusters or a cooperative grid are named
with that reason instead: their numerics are the GPU half's (tritonforge.runtime.verify).

    python -m tritonforge.pipeline.builds.numerics_check --kernels-dir kernels [--out numerics.json]

prints one JSON line per kernel ({name, group, problem, error}) and one per group left out ({group,
skipped}), and exits 1 when a kernel fails. TRITON_INTERPRET=1 must be set before Triton is imported
(`main` re-runs itself with it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

SKIP_REASONS = {
    "ptx": "inline PTX (PLATFORMS = cuda)",
    "cooperative": "a cooperative grid: its programs wait for one another, the interpreter runs one at a time",
    "cluster": "thread-block clusters",
}


def why_not_interpreted(kernel, contract) -> str | None:
    """Why the interpreter cannot run this kernel's programs (one at a time, no device), or None."""
    if contract is None:
        return "no launch contract"
    if kernel.platforms == ("cuda",):
        return SKIP_REASONS["ptx"]
    if contract.get("cooperative"):
        return SKIP_REASONS["cooperative"]
    if contract.get("cluster"):
        return SKIP_REASONS["cluster"]
    return None


def select(table) -> tuple[list[dict], dict[str, str]]:
    """(kernels to interpret as spec dicts, {group: why not} for the groups left out)."""
    firsts, skipped = {}, {}
    for k in table.kernels:
        key = (k.group, k.constants.get("FLAT", 0), k.constants.get("VEC", 0) > 0 and "BLOCK_SIZE" in k.constants,
               k.constants.get("D16", 0))
        if key in firsts or k.group in skipped:
            continue
        why = why_not_interpreted(k, table.contracts[k.group])
        if why:
            skipped[k.group] = why
        else:
            firsts[key] = {"script": k.script, "name": k.name, "group": k.group, "constants": k.constants,
                           "num_warps": k.num_warps, "contract": table.contracts[k.group]}
    return list(firsts.values()), skipped


# ---- inside the interpreter ---------------------------------------------------------------------------
_modules: dict = {}


def entry_func(script: str, name: str):
    """The interpreted jit function of table entry `name` (each script executed once, as ORT does)."""
    from . import interpreter

    if script not in _modules:
        path = Path(script).resolve()
        sys.path.insert(0, str(path.parent))  # helpers beside the script
        spec = importlib.util.spec_from_file_location(f"interpreted_{len(_modules)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for loaded in [module, *sys.modules.values()]:
            if str(getattr(loaded, "__file__", "") or "").startswith(str(path.parent)):
                interpreter.rebind(loaded)
        _modules[script] = {e["name"]: e["func"] for e in module.get_function_table()}
    return _modules[script][name]


def run_one(k: dict) -> dict:
    """One kernel under the interpreter: {name, group, problem, error} (error None when it matched)."""
    import numpy as np
    from tritonforge.runtime.kernel_cases import KernelSpec, case_for, case_with, grid
    from tritonforge.runtime.memory import from_storage, to_storage

    from . import interpreter
    from .interpreter import HostTensor

    spec = KernelSpec(k["name"], k["group"], k["constants"], k["num_warps"], k["contract"])
    case = case_with(spec, k["problem"]) if k.get("problem") else case_for(spec)  # a spec may fix the problem
    if case is None:
        return {"name": k["name"], "group": k["group"], "problem": None,
                "error": "no awkward problem its contract admits"}
    try:
        interpreter.NUM_WARPS = k["num_warps"]
        func = entry_func(k["script"], k["name"])
        tensor = lambda a, dt: HostTensor(to_storage(a, dt), bfloat16=dt == "bf16", fp8=dt == "fp8e4nv")
        values = {role: tensor(a, dt) for role, (a, dt) in case.inputs.items()}
        outs = {role: tensor(np.full(shape, np.nan, np.float32), dt) for role, (shape, dt) in case.outputs.items()}
        values.update(outs, **case.scalars)
        func[grid(spec, case.env)](*(values[r] for r in k["contract"]["params"]), **k["constants"],
                                   num_warps=k["num_warps"])
        error = case.check({role: from_storage(t.array, dt) for (role, t), (_, dt)
                            in zip(outs.items(), case.outputs.values())})
    except Exception:
        error = "raised " + traceback.format_exc(limit=-2).strip().splitlines()[-1]
    return {"name": k["name"], "group": k["group"], "problem": case.label, "error": error}


def _interpret(spec_path: str) -> int:
    for k in json.loads(Path(spec_path).read_text()):
        print(json.dumps(run_one(k)), flush=True)
    return 0


# ---- the check, from outside -------------------------------------------------------------------------
def check(kernels_dir: Path, python: str = sys.executable, env: dict | None = None, timeout: int = 1200) -> dict:
    """The interpreter check of every kernel script in `kernels_dir`, run by `python` (a Python with the
    Triton to check): {passed, triton, checked: [{name, group, problem, error}], skipped: {group: why}}."""
    from tritonforge.pipeline.scripts.table import load_table

    table = load_table(sorted(Path(kernels_dir).glob("*_triton.py")))
    kernels, skipped = select(table)
    return {**run_specs(kernels, python, env, timeout), "skipped": skipped}


def run_specs(kernels: list[dict], python: str = sys.executable, env: dict | None = None,
              timeout: int = 1200) -> dict:
    """Kernels given as spec dicts (select's, a "problem" of their own allowed) run by `python`'s
    interpreter: {passed, triton, checked: [{name, group, problem, error}]}."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(json.dumps(kernels))
        proc = subprocess.run([python, "-m", "tritonforge.pipeline.builds.numerics_check", "--spec", str(spec)],
                              env={**(env or os.environ), "TRITON_INTERPRET": "1"}, capture_output=True, text=True,
                              timeout=timeout)
    checked = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    triton = next((line.split(" ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("triton ")), "?")
    if proc.returncode or len(checked) != len(kernels):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        checked.append({"name": "(the interpreter run)", "group": "", "problem": None,
                        "error": f"stopped after {len(checked)} of {len(kernels)} kernels: {' | '.join(tail)}"})
    return {"passed": not any(c["error"] for c in checked), "triton": triton, "checked": checked}


def summary_line(result: dict) -> str:
    """What the host half checked, in one line."""
    failed = [c for c in result["checked"] if c["error"]]
    reasons: dict[str, int] = {}
    for why in result["skipped"].values():
        reasons[why.split(":")[0]] = reasons.get(why.split(":")[0], 0) + 1
    left = "; ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    return (f"{len(result['checked']) - len(failed)} of {len(result['checked'])} kernels passed (the first of "
            f"each interpretable group, on an awkward shape its contract admits)"
            + (f"; groups not interpretable: {left}" if left else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tritonforge.pipeline.builds.numerics_check",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--kernels-dir", help="check these kernel scripts (*_triton.py)")
    ap.add_argument("--spec", help=argparse.SUPPRESS)  # the worker: kernels to run, inside the interpreter
    ap.add_argument("--out", help="write the result (JSON) here")
    args = ap.parse_args(argv)
    if args.spec:
        if os.environ.get("TRITON_INTERPRET") != "1":
            raise SystemExit("error: --spec runs inside the interpreter: set TRITON_INTERPRET=1")
        import triton

        print(f"triton {triton.__version__}", flush=True)
        return _interpret(args.spec)
    if not args.kernels_dir or not Path(args.kernels_dir).is_dir():
        raise SystemExit(f"error: --kernels-dir {args.kernels_dir!r} is not a directory of kernel scripts")
    result = check(Path(args.kernels_dir))
    for c in result["checked"]:
        print(f"{'ok  ' if not c['error'] else 'FAIL'} {c['name']} {c['problem']}" + (f": {c['error']}" if c["error"]
                                                                                    else ""))
    for group, why in result["skipped"].items():
        print(f"left {group}: {why}")
    print(f"triton {result['triton']}: {summary_line(result)}")
    if args.out:
        from tritonforge.atomic import write_text

        write_text(args.out, json.dumps(result, indent=1) + "\n")
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
