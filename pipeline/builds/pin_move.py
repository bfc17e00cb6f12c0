"""Prove a Triton pin move before it ships: the ORT profile built with the current pin and with the
candidate, each with its own Triton (its own image on the docker runner, its own venv on the local one),
compared kernel by kernel, and the kernels' numerics checked under both.

What ORT's launch depends on, per kernel and arch: its hidden parameters, `args_size`, every parameter's
offset (ORT packs a fixed 32- or 80-byte struct: these must not move), its dynamic shared memory and warps
(ORT reads them from the header: reported), and whether ORT's plain launch stays valid (the build's
`ort_launchable`: CUDA's 48 KiB of shared memory and the rest; no hidden scratch, which ORT does not pass).
What a user cares about: registers and local memory (CUDA: cuobjdump's REG, and STACK + LOCAL bytes,
where spills land; ROCm: the code object's VGPRs and spill counts) and the blob's size.

Numerics, in two halves that the report keeps apart: on any machine, Triton's interpreter under each
Triton (tritonforge.pipeline.builds.numerics_check: the first kernel of each group it can run; the report
names the groups it cannot); on a CUDA GPU runner (`--gpu`), every kernel of the full profile for that
GPU, compiled by each Triton, against float64 (tritonforge.runtime.verify: clusters, cooperative grids
and inline PTX included), and the zoo's shapes timed under both (tritonforge.runtime.build_speed). The
move fails when an ORT-launchable kernel's launch would change, a kernel goes missing, or numerics fail
in either half; speed is reported.

    invoke pin-move --candidate 3.9.0            # report in pin-move/report.md and report.json
    invoke pin-move --candidate 3.9.0 --gpu      # on a CUDA GPU runner: and both halves on the GPU
    # a GPU runner that cannot install both Tritons: the GPU half alone, on both full builds made elsewhere
    python -m tritonforge.pipeline.builds.pin_move --gpu pin-move --builds DIR [--no-speed]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

from tritonforge import pins_dir
from tritonforge.atomic import write_text

# What ORT's fixed launch struct (32 bytes for softmax, 80 for GroupNorm) must match: a change breaks a
# consumer built against the old layout. The header carries shared memory and warps to ORT, so a change
# there is reported, not a failure (as long as the launch stays within ORT's 48 KiB).
STRUCT_FIELDS = ("args_size", "hidden", "params")
HEADER_FIELDS = ("shared", "num_warps")


@dataclass
class Side:
    version: str
    root: Path  # holds <platform>/<arch>/ of the ORT profile
    numerics: dict = field(default_factory=dict)  # {passed, output}


def python_for(version: str, cache: Path, log: Callable[[str], None]) -> str:
    """A Python with triton==version and what the compile images hold (pins/fatbin.txt, pins/image.txt):
    this one when its Triton is that version, else a venv made once under `cache`."""
    try:
        import triton

        if triton.__version__ == version:
            return sys.executable
    except ImportError:
        pass
    venv = cache / f"triton-{version}"
    python = venv / "bin" / "python"
    if not python.exists():
        log(f"making {venv} with triton=={version}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pins = Path(pins_dir())
        proc = subprocess.run([str(python), "-m", "pip", "install", "-q", f"triton=={version}",
                               "-r", str(pins / "fatbin.txt"), "-r", str(pins / "image.txt")],
                              capture_output=True, text=True)
        if proc.returncode:
            raise PipelineError(f"cannot install triton=={version}: {proc.stderr.strip().splitlines()[-1:]}")
    return str(python)


def _import_root(cache: Path) -> Path:
    """A directory from which another Python imports this copy of tritonforge and nothing else of this
    Python's (a venv with another Triton must not see this one's): a checkout's root, or, for an installed
    package, a directory holding a link to it."""
    import tritonforge

    package = Path(tritonforge.__file__).resolve().parent
    if not (package / "pipeline").is_dir():
        return package.parent  # a checkout: pipeline/ and runtime/ beside the package
    root = cache / "import"
    link = root / "tritonforge"
    if not link.is_symlink() or link.resolve() != package:
        root.mkdir(parents=True, exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(package, target_is_directory=True)
    return root


def _env(cache: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(_import_root(cache))}


def _triton_setting(version: str) -> list[str]:
    """The `triton` setting's flag for a build with `version`: none for the pin's own."""
    from tritonforge.pipeline.compile.pin import pinned_version

    return [] if version == pinned_version() else ["--triton", version]


def build_local(version: str, kernels_dir: Path, archs: list[str], platform: str, out: Path, cache: Path,
                compile_cache: Path, jobs: int, host: str, log, profile: str = "ort") -> None:
    """The `profile` of `archs` under `out`, compiled by triton==version in its own Python."""
    python = python_for(version, cache, log)
    cmd = [python, "-m", "tritonforge.pipeline.compile_dist", "--platform", platform, "--arch", ",".join(archs),
           "--kernels-dir", str(Path(kernels_dir).resolve()), "--out", str(out), "--jobs", str(jobs),
           "--host", host, "--profile", profile, "--cache-dir", str(compile_cache), *_triton_setting(version)]
    log(f"compiling the {profile} profile for {', '.join(archs)} with triton {version}")
    proc = subprocess.run(cmd, env=_env(cache), capture_output=True, text=True)
    if proc.returncode:
        raise PipelineError(f"the {profile} profile does not build with triton {version}:\n"
                            + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:]))


def interpreter_check(python: str, kernels_dir: Path, cache: Path) -> dict:
    """The host half under `python`'s Triton (tritonforge.pipeline.builds.numerics_check's result)."""
    from tritonforge.pipeline.builds import numerics_check

    return numerics_check.check(Path(kernels_dir), python, _env(cache))


# ---- what each kernel is ----------------------------------------------------------------------------
def _resources(blob: bytes, fmt: str, func: str) -> dict:
    if fmt == "hsaco":
        from tritonforge.runtime.hsaco import amdgpu_metadata

        k = next(k for k in amdgpu_metadata(blob)["amdhsa.kernels"] if k[".name"] == func)
        return {"registers": k.get(".vgpr_count"), "spills": (k.get(".vgpr_spill_count", 0) or 0)
                + (k.get(".sgpr_spill_count", 0) or 0)}
    from tritonforge.pipeline.package.containers import cuobjdump

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(blob)
        f.flush()
        out = subprocess.run([cuobjdump(), "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    reg = re.search(r"REG:(\d+)", out)
    stack = re.search(r"STACK:(\d+)", out)
    local = re.search(r"LOCAL:(\d+)", out)
    return {"registers": int(reg.group(1)) if reg else None,
            "spills": (int(stack.group(1)) if stack else 0) + (int(local.group(1)) if local else 0)}


def describe(build_dir: Path) -> dict[str, dict]:
    """Per kernel of one arch's build: what ORT's launch depends on and what a user sees."""
    from tritonforge.runtime.archive import read_archive_symbols

    from tritonforge.artifact_format import MANIFEST_NAME, read_kernels_json

    manifest = read_kernels_json(build_dir / MANIFEST_NAME)
    blobs = read_archive_symbols(build_dir / manifest["archive"]["file"])
    out = {}
    for k in manifest["kernels"]:
        hidden = [(h["name"], h["offset"], h.get("scratch_size", 0)) for h in k.get("hidden_params", [])]
        out[k["name"]] = {
            "args_size": k["args_size"], "shared": k["shared"], "num_warps": k["num_warps"],
            "hidden": hidden, "params": [(p["name"], p["offset"], p["size"]) for p in k["params"]],
            "ort_launchable": k.get("ort_launchable", True), "size": k["binary"]["size"],
            **_resources(blobs[k["symbol"]], k["binary"]["format"], k["func_name"]),
        }
    return out


# ---- the comparison ---------------------------------------------------------------------------------
def compare(current: dict[str, dict], candidate: dict[str, dict]) -> tuple[list[dict], list[str]]:
    """(rows, failures) for one arch: a row per kernel with both sides' values; a failure for every
    ORT-launchable kernel whose launch changes or stops being valid, and every kernel gone or new."""
    rows, failures = [], []
    for name in sorted(set(current) | set(candidate)):
        a, b = current.get(name), candidate.get(name)
        if a is None or b is None:
            failures.append(f"{name}: only built with {'the candidate' if a is None else 'the current pin'}")
            continue
        changed = [f for f in STRUCT_FIELDS if a[f] != b[f]]
        header = [f for f in HEADER_FIELDS if a[f] != b[f]]
        if a["ort_launchable"]:
            why = [f"{f} {a[f]} -> {b[f]}" for f in changed]
            if not b["ort_launchable"]:  # the build's own rule: CUDA's 48 KiB, clusters, cooperative grids, ...
                why.append("no longer launchable by ORT")
            if any(scratch for _, _, scratch in b["hidden"]):
                why.append("needs hidden scratch memory ORT does not pass")
            if why:
                failures.append(f"{name}: ORT's launch changes: {'; '.join(why)}")
        rows.append({"kernel": name, "ort_launchable": a["ort_launchable"], "launch_changed": changed,
                     "header_changed": {f: [a[f], b[f]] for f in header},
                     **{f"{k}_current": a[k] for k in ("registers", "spills", "size", "args_size")},
                     **{f"{k}_candidate": b[k] for k in ("registers", "spills", "size", "args_size")}})
    return rows, failures


def report(current: Side, candidate: Side, platform: str, archs: list[str]) -> dict:
    doc = {"schema": "tritonforge.pin-move/1", "platform": platform, "profile": "ort",
           "current": {"triton": current.version, "numerics": current.numerics},
           "candidate": {"triton": candidate.version, "numerics": candidate.numerics}, "archs": {}, "failures": []}
    for side in (current, candidate):
        if side.numerics and not side.numerics["passed"]:
            doc["failures"].append(f"interpreter numerics fail under triton {side.version}: "
                                   + _failed(side.numerics["checked"], 5))
    for arch in archs:
        rows, failures = compare(describe(current.root / platform / arch), describe(candidate.root / platform / arch))
        doc["archs"][arch] = rows
        doc["failures"] += [f"{arch}: {f}" for f in failures]
    return doc


def _summary(rows: list[dict]) -> dict:
    def total(key):
        return sum(r[key] or 0 for r in rows)

    return {"kernels": len(rows), "ort_launchable": sum(r["ort_launchable"] for r in rows),
            "launch_changed": sum(bool(r["launch_changed"]) for r in rows),
            "shared_changed": sum("shared" in r["header_changed"] for r in rows),
            "warps_changed": sum("num_warps" in r["header_changed"] for r in rows),
            "registers_up": sum((r["registers_candidate"] or 0) > (r["registers_current"] or 0) for r in rows),
            "registers_down": sum((r["registers_candidate"] or 0) < (r["registers_current"] or 0) for r in rows),
            "spilling_current": sum(bool(r["spills_current"]) for r in rows),
            "spilling_candidate": sum(bool(r["spills_candidate"]) for r in rows),
            "bytes_current": total("size_current"), "bytes_candidate": total("size_candidate")}


def markdown(doc: dict) -> str:
    cur, cand = doc["current"]["triton"], doc["candidate"]["triton"]
    checked = any(doc[side]["numerics"] for side in ("current", "candidate")) or (doc.get("gpu") or {}).get("numerics")
    lines = [f"# Triton pin move {cur} -> {cand} ({doc['platform']}, {doc['profile']} profile)", "",
             "**verdict: " + ("the move fails" if doc["failures"] else "ORT's launch of every kernel is unchanged"
                              + (" and numerics pass" if checked else "; numerics not run")) + "**"]
    if doc["failures"]:
        lines += ["", *[f"- {f}" for f in doc["failures"][:50]]]
    if len(doc["failures"]) > 50:
        lines.append(f"- ... and {len(doc['failures']) - 50} more (report.json)")
    lines += ["", "| arch | kernels | ORT-launchable | ORT struct changed | shared / warps changed (header) | "
              f"registers up / down | local memory or spills ({cur} / {cand}) | blob bytes ({cur} / {cand}) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for arch, rows in doc["archs"].items():
        s = _summary(rows)
        lines.append(f"| {arch} | {s['kernels']} | {s['ort_launchable']} | {s['launch_changed']} | "
                     f"{s['shared_changed']} / {s['warps_changed']} | {s['registers_up']} / {s['registers_down']} | "
                     f"{s['spilling_current']} / "
                     f"{s['spilling_candidate']} | {s['bytes_current']:,} / {s['bytes_candidate']:,} |")
    lines += ["", *_numerics_lines(doc)]
    speed = (doc.get("gpu") or {}).get("summary")
    if speed:
        lines += ["", f"Speed on {doc['gpu']['device']} (tritonforge.runtime.build_speed: every zoo shape, both "
                      f"builds tuned and timed in one process; ratio = time with {cand} / time with {cur}, above 1 "
                      "is slower):", "",
                  "| kernels | shapes | median | worst | over 1.03x |", "| --- | --- | --- | --- | --- |"]
        for kind, s in speed.items():
            over = s["slower_than_target"]
            name = "runtime best" if kind == "best" else "ORT group"
            lines.append(f"| {name} | {s['shapes']} | {s['median']:.3f}x | {s['worst'][1]:.3f}x ({s['worst'][0]}) | "
                         f"{len(over)}"
                         + (f": {', '.join(over[:8])}" + (" ..." if len(over) > 8 else "") if over else "") + " |")
    elif doc.get("gpu"):
        lines += ["", f"Speed on {doc['gpu']['device']}: not timed in this run (numerics only)."]
    return "\n".join(lines) + "\n"


def _numerics_lines(doc: dict) -> list[str]:
    """Which half of the numerics ran, under which Triton, and exactly what each checked."""
    from tritonforge.pipeline.builds import numerics_check
    from tritonforge.runtime import verify

    lines = ["Numerics, host half (Triton's interpreter on the kernel scripts, no GPU):"]
    for side in ("current", "candidate"):
        n = doc[side]["numerics"]
        lines.append(f"- triton {doc[side]['triton']}: " + ("not run" if not n else
                                                           ("passed: " if n["passed"] else "FAILED: ")
                                                           + numerics_check.summary_line(n)))
    gpu = (doc.get("gpu") or {}).get("numerics")
    lines += ["", "Numerics, GPU half (compiled code: every kernel of the full profile, against float64):"]
    if not gpu:
        lines.append("- not run: `invoke pin-move --gpu` on a CUDA GPU runner runs it")
    for side in ("current", "candidate") if gpu else ():
        n = gpu[side]
        lines.append(f"- triton {n['triton']}: " + ("passed: " if n["passed"] else "FAILED: ") + verify.summary_line(n)
                     + ("" if n["passed"] else f"; failed: {_failed(n['checked'], 8)}") + _ort_share(doc, n))
    return lines


def _ort_share(doc: dict, checked: dict) -> str:
    """How many of the ORT profile's kernels for the GPU's arch the GPU half checked, and passed."""
    ort = {r["kernel"] for r in doc.get("archs", {}).get(checked["arch"], [])}
    if not ort:
        return ""
    ok = {c["name"] for c in checked["checked"] if not c["error"]} & ort
    seen = {c["name"] for c in checked["checked"]} & ort
    return f"; the ORT profile's {len(ort)} {checked['arch']} kernels: {len(seen)} checked, {len(ok)} passed"


def _failed(checked: list[dict], most: int) -> str:
    """The names of the kernels a numerics half failed, the first `most` of them."""
    names = [c["name"] for c in checked if c["error"]]
    return ", ".join(names[:most]) + (" ..." if len(names) > most else "")


def write_report(doc: dict, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    return (write_text(out / "report.json", json.dumps(doc, separators=(",", ":")) + "\n"),
            write_text(out / "report.md", markdown(doc)))


# ---- the two builds and their checks ------------------------------------------------------------------
def interpreter_check_in(image: str, kernels_dir: Path) -> dict:
    """The host half inside a compile image (its own tritonforge and Triton; the kernel scripts mounted
    read-only, no network)."""
    import tempfile

    from tritonforge.pipeline.builds.images import client
    from tritonforge.pipeline.builds.runners import container_user

    import docker

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o777)  # the container's user writes the result
        try:
            client().containers.run(
                image, ["-m", "tritonforge.pipeline.builds.numerics_check", "--kernels-dir", "/kernels", "--out",
                        "/out/numerics.json"], entrypoint=["python3"],
                volumes={str(Path(kernels_dir).resolve()): {"bind": "/kernels", "mode": "ro"},
                         tmp: {"bind": "/out", "mode": "rw"}},
                environment={"PYTHONDONTWRITEBYTECODE": "1"}, network_mode="none", user=container_user(),
                remove=True, stdout=True, stderr=True)
            tail = ""
        except docker.errors.ContainerError as exc:
            tail = (exc.stderr or b"").decode(errors="replace").strip()
        result = Path(tmp) / "numerics.json"
        if result.is_file():
            return json.loads(result.read_text())
    return {"passed": False, "triton": "?", "skipped": {}, "checked": [
        {"name": "(the interpreter run)", "group": "", "problem": None,
         "error": f"no result from {image}: {' | '.join(tail.splitlines()[-3:])}"}]}


def run(kernels_dir: Path, platform: str, archs: list[str], current: str, candidate: str, runner: str,
        out: Path, cache: Path, compile_cache: Path, jobs: int, host: str, numerics: bool, log) -> dict:
    """Build both sides (one build when the versions are the same), check, compare, write the report;
    returns it (its `failures` empty when the move is safe). `cache`: the local runner's venvs;
    `compile_cache`: the builds' (its keys hold Triton's version)."""
    from tritonforge.pipeline.builds.images import build_image
    from tritonforge.pipeline.builds.runners import run_docker
    from tritonforge.pipeline.compile.targets import parse_targets

    targets = parse_targets(archs, platform=platform)
    if current == candidate:  # a pull request that touched the pin file without moving the pin
        log(f"triton {current} on both sides: one build, compared with itself; numerics are the tests' own")
        numerics = False
    sides = {}
    for version in dict.fromkeys([current, candidate]):
        side = Side(version, out / f"triton-{version}")
        other = _image_triton(version)
        if runner == "docker":
            run_docker(kernels_dir, targets, side.root, compile_cache, jobs, log, host, platform, profile="ort",
                       triton=other)
            if numerics:
                side.numerics = interpreter_check_in(build_image(platform, log, triton=other), kernels_dir)
        else:
            build_local(version, kernels_dir, [t.arch_name for t in targets], platform, side.root, cache,
                        compile_cache, jobs, host, log)
            if numerics:
                side.numerics = interpreter_check(python_for(version, cache, log), kernels_dir, cache)
        log(f"triton {version}: built; numerics " + ("not checked" if not numerics else
                                                     "pass" if side.numerics["passed"] else "FAIL"))
        sides[version] = side
    doc = report(sides[current], sides[candidate], platform, [t.arch_name for t in targets])
    write_report(doc, out)
    return doc


def _image_triton(version: str) -> str | None:
    """What run_docker takes for `version`: None for the pin's own image, else the version."""
    from tritonforge.pipeline.compile.pin import pinned_version

    return None if version == pinned_version() else version


def gpu_half(doc: dict, kernels_dir: Path, runner: str, out: Path, cache: Path, compile_cache: Path, jobs: int,
             host: str, log, builds: Path | None = None, speed: bool = True) -> dict:
    """Both Tritons on this CUDA GPU: the full profile for its arch built with each (the runtime's every
    family, ORT's groups among them), every kernel of each build checked against float64 (a failure fails
    the move), then the zoo's shapes timed under both (reported). `builds`: a folder holding those builds
    already made elsewhere (`triton-<version>/cuda/<arch>`, compiled on a CPU machine): the exact bytes
    are checked and nothing is compiled here."""
    if doc["platform"] != "cuda":
        raise PipelineError("the GPU half of a pin move runs on a CUDA GPU (no ROCm runtime here)")
    for side in ("current", "candidate") if builds else ():
        _check_prebuilt(builds / f"triton-{doc[side]['triton']}", doc[side]["triton"])

    from tritonforge.pipeline.builds.runners import run_docker
    from tritonforge.pipeline.compile.targets import parse_targets
    from tritonforge.runtime import build_speed, load_artifacts, verify, zoo
    from tritonforge.runtime.cuda import CudaBackend, driver_available
    from tritonforge.runtime.registry import Registry

    ok, why = driver_available()
    if not ok:
        raise PipelineError(f"the GPU half needs a CUDA GPU: no usable NVIDIA GPU here ({why})")
    backend = CudaBackend(0)
    arch = f"sm_{backend.arch}"
    roots, checked = {}, {}
    for side in ("current", "candidate"):
        version = doc[side]["triton"]
        roots[side] = root = (builds or out / "full") / f"triton-{version}"
        if builds:
            if not (root / "cuda" / arch / "kernels.json").is_file():
                raise PipelineError(f"{root}: no build for this GPU's {arch}")
        elif runner == "docker":
            run_docker(kernels_dir, parse_targets([arch], platform="cuda"), root, compile_cache, jobs, log, host,
                       "cuda", profile="full", triton=_image_triton(version))
        else:
            build_local(version, kernels_dir, [arch], "cuda", root, cache, compile_cache, jobs, host, log, "full")
        log(f"triton {version}: every kernel of the full profile for {arch} against float64")
        checked[side] = verify.verify(Registry(load_artifacts(root / "cuda" / arch), backend), say=log)
        log(f"triton {version}: {verify.summary_line(checked[side])}")
        if not checked[side]["passed"]:
            doc["failures"].append(f"{arch}: compiled-code numerics fail under triton {version}: "
                                   + _failed(checked[side]["checked"], 5))
    doc["gpu"] = {"device": backend.device_name, "numerics": checked}
    if not doc["failures"] and speed:
        log("the zoo's shapes under both builds")
        timed = build_speed.compare_builds(roots["current"], roots["candidate"], zoo.models("all"))
        doc["gpu"]["summary"] = timed["summary"]
        write_text(out / "gpu.json", json.dumps(timed, indent=1) + "\n")
    write_report(doc, out)
    return doc


def _check_prebuilt(root: Path, version: str) -> None:
    """A folder of full-profile CUDA builds by triton `version` (cuda/<arch>/kernels.json), or an error."""
    manifests = sorted(root.glob("cuda/*/kernels.json"))
    if not manifests:
        raise PipelineError(f"{root}: no build here (cuda/<arch>/kernels.json): the GPU half takes the full "
                            f"profile built with triton {version}")
    for manifest in manifests:
        doc = json.loads(manifest.read_text())
        if doc.get("triton_version") != version or doc.get("profile") != "full":
            raise PipelineError(f"{manifest}: the {doc.get('profile')} profile by triton {doc.get('triton_version')}, "
                                f"not the full profile by triton {version}")


def main(argv=None) -> int:
    """The GPU half alone, for a GPU runner that cannot install both Tritons: the host half's report
    (OUT/report.json, from `invoke pin-move`) and both full builds made on a CPU machine."""
    import argparse

    from tritonforge.errors import TritonforgeError

    ap = argparse.ArgumentParser(prog="python -m tritonforge.pipeline.builds.pin_move", description=main.__doc__)
    ap.add_argument("--gpu", required=True, metavar="OUT", help="the pin move's folder (report.json inside)")
    ap.add_argument("--builds", required=True, help="holds triton-<version>/cuda/<arch> for both sides, full profile")
    ap.add_argument("--no-speed", action="store_true", help="numerics only: leave out timing the zoo's shapes")
    args = ap.parse_args(argv)
    out = Path(args.gpu)
    if not (out / "report.json").is_file():
        raise SystemExit(f"error: {out / 'report.json'} is missing: `invoke pin-move` writes it (the host half)")
    doc = json.loads((out / "report.json").read_text())
    try:  # nothing is compiled: the kernel scripts, caches and jobs of a build are not used
        doc = gpu_half(doc, Path(), "local", out, Path(), Path(), 1, "x86_64", print, builds=Path(args.builds),
                       speed=not args.no_speed)
    except TritonforgeError as exc:
        raise SystemExit(f"error: {exc}") from None
    except ImportError as exc:  # the runtime's CUDA bindings (cuda-python) are not installed
        raise SystemExit(f"error: the GPU half runs the kernels through cuda-python: {exc}") from None
    print(f"{out}/report.md: triton {doc['current']['triton']} -> {doc['candidate']['triton']}, "
          f"{len(doc['failures'])} problem(s)")
    return 1 if doc["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
