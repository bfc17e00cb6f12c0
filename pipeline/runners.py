"""Where compilation runs: `local` (this Python) or `docker` (the platform's compile image, source
mounted read-only, no network, non-root). Both produce the same bytes; both leave dist/ untouched on
failure because results are swapped into place only after every target built."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from .build import BuildReport, TargetReport, build_dist, discover_scripts, install_targets
from .errors import PipelineError
from .images import build_image, client, engine_available

CONTAINER_UID = 10001  # the image's non-root user


def container_user() -> str:
    """Never root inside: the invoking user's ids (its files stay its own), or the image's user when
    the host side runs as root."""
    uid, gid = os.getuid(), os.getgid()
    return f"{uid}:{gid}" if uid != 0 else f"{CONTAINER_UID}:{CONTAINER_UID}"


def choose_runner(runner: str, log) -> str:
    if runner not in ("auto", "docker", "local"):
        raise PipelineError(f"--runner must be auto, docker or local, not '{runner}'")
    if runner == "auto":
        runner = "docker" if engine_available() else "local"
        log(f"runner: {runner} ({'a Docker engine answered' if runner == 'docker' else 'no Docker engine reachable'})")
    return runner


def run_local(kernels_dir, targets, out, cache_dir, jobs, progress, host) -> BuildReport:
    return build_dist(discover_scripts(kernels_dir), targets, out, cache_dir=cache_dir, jobs=jobs,
                      progress=progress, host=host)


def _shared_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)  # the container's non-root user writes here
    return path


def run_docker(kernels_dir, targets, out, cache_dir, jobs, log, host, platform: str) -> BuildReport:
    import time

    t0 = time.perf_counter()
    image = build_image(platform, log)
    c = client()
    kernels_dir = Path(kernels_dir).resolve()
    if not kernels_dir.is_dir():
        raise PipelineError(f"kernels directory '{kernels_dir}' does not exist")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".docker-", dir=out))  # same file system as out: renames work
    try:
        _shared_dir(work / "out")
        volumes = {str(kernels_dir): {"bind": "/src/kernels", "mode": "ro"},
                   str(work / "out"): {"bind": "/out", "mode": "rw"}}
        if cache_dir:  # a cache of its own: entries are written by the container's user
            cache = Path(f"{Path(cache_dir).resolve()}-docker")
            volumes[str(_shared_dir(cache))] = {"bind": "/cache", "mode": "rw"}
        cmd = ["--platform", platform, "--arch", ",".join(t.arch_name for t in targets),
               "--kernels-dir", "/src/kernels", "--out", "/out", "--jobs", str(jobs), "--host", host]
        if cache_dir:
            cmd += ["--cache-dir", "/cache"]
        user = container_user()
        log(f"docker run {image} (network none, user {user}, kernels read-only)")
        container = c.containers.run(image, cmd, volumes=volumes, network_mode="none", detach=True,
                                     user=user, working_dir="/src")
        try:
            lines = []
            for chunk in container.logs(stream=True, follow=True):
                for line in chunk.decode(errors="replace").splitlines():
                    lines.append(line)
                    log(f"  | {line}")
            code = container.wait()["StatusCode"]
        finally:
            container.remove(force=True)
        if code != 0:
            errors = [line for line in lines if line.startswith("error:")] or lines[-20:]
            raise PipelineError(f"compile in {image} failed (exit {code}):\n" + "\n".join(errors))
        reports = []
        for t in targets:
            staged = work / "out" / t.platform / t.arch_name
            if not (staged / "kernels.json").is_file():
                raise PipelineError(f"the container produced no {t.platform}/{t.arch_name}")
            rep = TargetReport(t)
            # compile_dist prints "compile: <platform>/<arch>: N kernels, C compiled, H cached, ..."
            for line in lines:
                m = re.match(rf"compile: {t.platform}/{t.arch_name}: (\d+) kernels, (\d+) compiled, (\d+) cached", line)
                if m:
                    rep.kernels, rep.compiled, rep.cached = map(int, m.groups())
            reports.append(rep)
        install_targets(work / "out", targets, out, reports)
        info = {"tag": image, "id": c.images.get(image).id}
        for t in targets:  # which image built it, for the release manifest
            (out / t.platform / f"{t.arch_name}.image.json").write_text(json.dumps(info) + "\n")
        return BuildReport(reports, time.perf_counter() - t0, _triton_of(out, targets[0]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _triton_of(out: Path, target) -> str:
    import json

    return json.loads((out / target.platform / target.arch_name / "kernels.json").read_text())["triton_version"]


def run_gpu_tests(image: str, platform: str, dist: Path, repo: Path, log) -> int:
    """pytest -m gpu inside the image: the repository and dist/ mounted read-only, the GPU passed in."""
    import docker

    c = client()
    if platform == "cuda":
        devices = {"device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]}
    else:
        devices = {"devices": ["/dev/kfd:/dev/kfd", "/dev/dri:/dev/dri"], "group_add": ["video"]}
    container = c.containers.run(
        image, ["-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-q", "tests/runtime"],
        entrypoint=["python3"], working_dir="/src", detach=True, network_mode="none", user=container_user(),
        environment={"PYTHONPATH": "/src", "TRITONFORGE_DIST": "/dist", "CI": os.environ.get("CI", "")},
        volumes={str(repo.resolve()): {"bind": "/src", "mode": "ro"}, str(dist): {"bind": "/dist", "mode": "ro"}},
        **devices)
    try:
        for chunk in container.logs(stream=True, follow=True):
            for line in chunk.decode(errors="replace").splitlines():
                log(line)
        return container.wait()["StatusCode"]
    finally:
        container.remove(force=True)
