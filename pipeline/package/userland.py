"""The wheel where users are: pip-installed into an older Linux than the build machine's and run there.

`check_wheel(wheel, suite)` makes (once) an image of that Debian release with its own Python (debootstrap
--variant=minbase with python3 and python3-venv, imported into Docker: no registry is needed), fetches on this
machine the wheels that Python needs (onnxruntime's CPU build for it, the oldest the README promises, exactly,
and the newest; onnx, numpy), and in a container with no network creates a venv per onnxruntime, lets that
system's pip install the wheel (pip refuses a wheel whose platform tag the system's glibc does not meet: the
very check users hit), and runs templates/userland_check.py: import, the library loaded in onnxruntime, a model
rewritten by `tritonforge-rewrite` and run on the CPU EP with the library's ops against onnxruntime's own run.
Debian 11 (bullseye: glibc 2.31, Python 3.9) is older than every glibc the host toolchains of today link
against (2.34 moved dlopen into libc) and than Ubuntu 22.04's 2.35.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package.wheel import OLDEST_ONNXRUNTIME

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "userland_check.py"
SUITES = {"bullseye": "Debian 11"}
# The onnxruntime builds each check runs on, by name: the oldest the README promises, exactly (with the numpy
# it was built for), and the newest pip finds for that Python.
RUNTIMES = {"oldest": [f"onnxruntime=={OLDEST_ONNXRUNTIME}", "numpy<2"],
            "newest": [f"onnxruntime>={OLDEST_ONNXRUNTIME}"]}


def image_tag(suite: str) -> str:
    return f"tritonforge/userland:{suite}"


def ensure_image(suite: str, log=print, c=None) -> str:
    """The userland image of `suite`, made with debootstrap unless it exists (`c`: a Docker client)."""
    from tritonforge.pipeline.builds.images import client, debootstrap_image, image_exists

    known(suite)
    c = c or client()
    tag = image_tag(suite)
    if not image_exists(c, tag):
        debootstrap_image(c, tag, suite, log, include=("python3", "python3-venv"))
    return tag


def known(suite: str) -> None:
    """A PipelineError naming the suites where `suite` is none of them."""
    if suite not in SUITES:
        raise PipelineError(f"unknown userland '{suite}' (known: {', '.join(SUITES)})")


def _run(c, tag: str, cmd: list[str], mounts: dict[str, tuple[str, str]], network: str = "none") -> str:
    """stdout of `cmd` in a throwaway container of `tag` ({host path: (path inside, "ro" or "rw")}); a
    PipelineError with its output when it fails."""
    import docker

    volumes = {host: {"bind": inside, "mode": mode} for host, (inside, mode) in mounts.items()}
    try:
        out = c.containers.run(tag, cmd, volumes=volumes, network_mode=network, remove=True, stdout=True,
                               stderr=True)
    except docker.errors.ContainerError as exc:
        said = (exc.stderr or b"").decode(errors="replace").strip()
        raise PipelineError(f"in {tag}: {' '.join(cmd[-1:])[:200]} failed:\n{said[-3000:]}") from None
    return out.decode(errors="replace")


def _python_of(c, tag: str) -> tuple[str, int]:
    """(the image's python3 version as X.Y, its glibc minor version)."""
    said = _run(c, tag, ["python3", "-c", "import os, sys; print(sys.version_info[0], sys.version_info[1], "
                                          "os.confstr('CS_GNU_LIBC_VERSION').split()[1])"], {})
    major, minor, glibc = said.split()
    return f"{major}.{minor}", int(glibc.split(".")[1])


def fetch_wheels(python: str, glibc: int, dest: Path, log=print) -> None:
    """Wheels for that Python on that glibc (pip download here, where the network is): each RUNTIMES set of
    onnxruntime, with onnx, numpy and what they need, in a folder of its own under `dest`."""
    platforms = [f"manylinux_2_{v}_x86_64" for v in range(glibc, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "any"]
    for name, specs in RUNTIMES.items():
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp", "-d", str(dest / name), *specs, "onnx", "numpy"]
        for p in platforms:
            cmd += ["--platform", p]
        log(f"fetching {' '.join(specs)} and onnx wheels for Python {python} on glibc 2.{glibc}")
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise PipelineError(f"pip download of {' '.join(specs)} for Python {python} failed: "
                                f"{proc.stderr.strip()[-1500:]}")


def check_wheel(wheel: Path | str, suite: str = "bullseye", model: Path | str | None = None,
                cache: Path | str = ".cache/tritonforge", log=print) -> list[dict]:
    """Install `wheel` into fresh venvs of `suite`'s own Python, one per RUNTIMES onnxruntime, and run it there
    (module docstring); returns what each run printed ({glibc, python, onnxruntime, kernels, rewritten, said,
    max_rel_diff}), oldest onnxruntime first. A run that fails (nothing rewritten, numbers off) raises."""
    wheel = Path(wheel).resolve()
    if not wheel.is_file():
        raise PipelineError(f"{wheel}: no such wheel (invoke wheel makes it)")
    from tritonforge.pipeline.builds.images import client

    known(suite)
    c = client()
    tag = ensure_image(suite, log, c)
    python, glibc = _python_of(c, tag)
    wheels = Path(cache).resolve() / "userland-wheels" / f"{suite}-py{python}"
    if not all(any((wheels / name).glob("onnxruntime-*.whl")) for name in RUNTIMES):
        wheels.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".fetch-", dir=wheels.parent))
        try:
            fetch_wheels(python, glibc, staging, log)
            shutil.rmtree(wheels, ignore_errors=True)
            os.replace(staging, wheels)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="tf-userland-") as tmp:
        tmp = Path(tmp)
        shutil.copy(wheel, tmp / wheel.name)
        shutil.copy(TEMPLATE, tmp / TEMPLATE.name)
        args = []
        if model is not None:
            model = Path(model)
            for f in [model, *model.parent.glob(f"{model.name}.data")]:
                shutil.copy(f, tmp / f.name)
            args = [f"/work/{model.name}"]
        os.chmod(tmp, 0o777)
        log(f"installing {wheel.name} with {SUITES[suite]}'s pip (Python {python}, glibc 2.{glibc}) beside the "
            f"oldest and the newest onnxruntime, and running it")
        script = "set -e; cd /work; " + "; ".join(
            f"python3 -m venv /tmp/{name}; /tmp/{name}/bin/pip install -q --no-index --find-links /in-wheels/{name} "
            f"/work/{wheel.name} {' '.join(repr(s) for s in specs)}; /tmp/{name}/bin/python {TEMPLATE.name} "
            f"{' '.join(args)}" for name, specs in RUNTIMES.items())
        said = _run(c, tag, ["sh", "-c", script], {str(wheels): ("/in-wheels", "ro"), str(tmp): ("/work", "rw")})
    results = [json.loads(s) for s in said.splitlines() if s.startswith("{")]
    if len(results) != len(RUNTIMES):
        raise PipelineError(f"in {tag}: the check printed {len(results)} results of {len(RUNTIMES)}:\n{said[-2000:]}")
    if results[0]["onnxruntime"] != OLDEST_ONNXRUNTIME:
        raise PipelineError(f"in {tag}: the oldest run got onnxruntime {results[0]['onnxruntime']}, not "
                            f"{OLDEST_ONNXRUNTIME}")
    return results


def summary(results: list[dict], suite: str) -> str:
    """One line per run of a check_wheel result."""
    return "\n".join(
        f"{SUITES[suite]} ({r['glibc']}, Python {r['python']}, onnxruntime {r['onnxruntime']} CPU): installed, "
        f"imported, library loaded ({r['kernels']} kernels), {r['rewritten']} nodes rewritten, max rel diff "
        f"{r['max_rel_diff']:.2g} against onnxruntime's own run" for r in results)
