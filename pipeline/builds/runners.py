"""Where compilation runs: `local` (this Python) or `docker` (the platform's compile image, source
mounted read-only, no network, non-root). Both produce the same bytes; both leave dist/ untouched on
failure because results are swapped into place only after every target built."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from tritonforge.pipeline.builds.dist import BuildReport, build_dist, discover_scripts, install_targets
from tritonforge.pipeline.builds.images import build_image, client, engine_unavailable
from tritonforge.pipeline.errors import PipelineError

from tritonforge.artifact_format import MANIFEST_NAME, MULTI
from tritonforge.atomic import write_text

CONTAINER_UID = 10001  # the image's non-root user
RUNNERS = ("auto", "docker", "local")


def container_user() -> str:
    """Never root inside: the invoking user's ids (its files stay its own), or the image's user when
    the host side runs as root."""
    uid, gid = os.getuid(), os.getgid()
    return f"{uid}:{gid}" if uid != 0 else f"{CONTAINER_UID}:{CONTAINER_UID}"


def choose_runner(runner: str, log) -> str:
    if runner not in RUNNERS:
        raise PipelineError(f"--runner must be one of {', '.join(RUNNERS)}, not '{runner}'")
    if runner == "auto":
        why = engine_unavailable()
        runner = "local" if why else "docker"
        log(f"runner: {runner} ({why or 'a Docker engine answered'})")
    return runner


def run_local(kernels_dir, targets, out, cache_dir, jobs, host, progress=None,
              allow_unpinned: bool = False, profile: str = "full", triton: str | None = None) -> BuildReport:
    """Compile in this Python (its Triton must be the pin, or `triton`); no image built these bytes, so a
    stale record of one is dropped."""
    report = build_dist(discover_scripts(kernels_dir), targets, out, cache_dir=cache_dir, jobs=jobs,
                        allow_unpinned=allow_unpinned, progress=progress, host=host, profile=profile,
                        triton=triton)
    for platform, name in built_dirs(targets):
        image_record(Path(out), platform, name).unlink(missing_ok=True)
    return report


def built_dirs(targets) -> list[tuple[str, str]]:
    """(platform, directory name) of everything a build of `targets` writes: each arch, each platform's multi."""
    return ([(t.platform, t.arch_name) for t in targets] +
            [(p, "multi") for p in dict.fromkeys(t.platform for t in targets)])


def image_record(out: Path, platform: str, name: str) -> Path:
    """`<out>/<platform>/<arch>.image.json`: which image built that directory's bytes (docker runner)."""
    return out / platform / f"{name}.image.json"


def _shared_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o777)  # the container's non-root user writes here
    return path


def run_docker(kernels_dir, targets, out, cache_dir, jobs, log, host, platform: str,
               profile: str = "full", triton: str | None = None) -> BuildReport:
    """Compile in the platform's image (`triton`: one made with that version instead of the pin): kernels
    mounted read-only, no network, a non-root user; the results are swapped into `out` only when every
    target built."""
    import docker

    discover_scripts(kernels_dir)  # no kernels directory or scripts: say so before building an image
    image = build_image(platform, log, triton=triton)
    c = client()
    # Docker takes bind mounts as absolute host paths only (a relative one reads as a volume name).
    kernels_dir = Path(kernels_dir).resolve()
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".docker-", dir=out))  # same file system as out: renames work
    try:
        _shared_dir(work / "out")
        volumes = {str(kernels_dir): {"bind": "/src/kernels", "mode": "ro"},
                   str(work / "out"): {"bind": "/out", "mode": "rw"}}
        cmd = ["--platform", platform, "--arch", ",".join(t.arch_name for t in targets),
               "--kernels-dir", "/src/kernels", "--out", "/out", "--jobs", str(jobs), "--host", host,
               "--report", "/out/report.json", "--profile", profile, *(["--triton", triton] if triton else [])]
        if cache_dir:  # a cache of its own: entries are written by the container's user
            cache = _shared_dir(Path(f"{Path(cache_dir).resolve()}-docker"))
            volumes[str(cache)] = {"bind": "/cache", "mode": "rw"}
            cmd += ["--cache-dir", "/cache"]
        user = container_user()
        log(f"docker run {image} (network none, user {user}, kernels read-only)")
        try:
            code, lines = _run_container(c, image, cmd, volumes, user, log)
        except docker.errors.DockerException as exc:
            raise PipelineError(f"running {image} failed: {exc}") from None
        if code != 0:
            errors = [line for line in lines if line.startswith("error:")] or lines[-20:]
            raise PipelineError(f"compile in {image} failed (exit {code}):\n" + "\n".join(errors))
        report_file = work / "out" / "report.json"
        if not report_file.is_file():
            raise PipelineError(f"the compile in {image} wrote no build report")
        report = BuildReport.from_json(report_file.read_text())
        for t in targets:
            if not (work / "out" / t.platform / t.arch_name / MANIFEST_NAME).is_file():
                raise PipelineError(f"the container produced no {t.platform}/{t.arch_name}")
        for m in report.multi:
            if not (work / "out" / m.platform / MULTI / MANIFEST_NAME).is_file():
                raise PipelineError(f"the container produced no {m.platform}/multi")
        install_targets(work / "out", targets, out, report.targets, report.multi)
        record = json.dumps({"tag": image, "id": c.images.get(image).id}) + "\n"
        for platform, name in built_dirs(targets):  # which image built it, for the release manifest
            _write_atomic(image_record(out, platform, name), record)
        return report
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_container(c, image, cmd, volumes, user, log) -> tuple[int, list[str]]:
    container = c.containers.run(image, cmd, volumes=volumes, network_mode="none", detach=True,
                                 user=user, working_dir="/src")
    try:
        lines = []
        for chunk in container.logs(stream=True, follow=True):
            for line in chunk.decode(errors="replace").splitlines():
                lines.append(line)
                log(f"  | {line}")
        return container.wait()["StatusCode"], lines
    finally:
        container.remove(force=True)


def _write_atomic(path: Path, text: str) -> None:
    write_text(path, text)


def gpu_unavailable(platform: str) -> str | None:
    """Why this machine has no GPU of the platform to test on (None: it has one)."""
    if platform == "cuda":
        from tritonforge.runtime.cuda import driver_available

        ok, why = driver_available()
        return None if ok else f"no usable NVIDIA GPU ({why})"
    if not Path("/dev/kfd").exists():
        return "no ROCm GPU (/dev/kfd does not exist)"
    return None


def run_gpu_tests(image: str, platform: str, dist: Path, repo: Path, log) -> int:
    """pytest -m gpu inside the image: the repository and dist/ mounted read-only, the GPU passed in."""
    import docker

    c = client()
    try:
        return _run_gpu_container(c, image, platform, dist, repo, log)
    except docker.errors.DockerException as exc:
        raise PipelineError(f"running the GPU tests in {image} failed: {exc}") from None


def _run_gpu_container(c, image: str, platform: str, dist: Path, repo: Path, log) -> int:
    import docker

    if platform == "cuda":
        devices = {"device_requests": [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]}
    else:
        devices = {"devices": ["/dev/kfd:/dev/kfd", "/dev/dri:/dev/dri"], "group_add": ["video"]}
    container = c.containers.run(
        image, ["-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-q", "tests/runtime"],
        entrypoint=["python3"], working_dir="/src", detach=True, network_mode="none", user=container_user(),
        environment={"PYTHONPATH": "/src", "TRITONFORGE_DIST": "/dist", "CI": os.environ.get("CI", ""),
                     "TRITONFORGE_REQUIRE_GPU": "1"},
        volumes={str(repo.resolve()): {"bind": "/src", "mode": "ro"}, str(dist): {"bind": "/dist", "mode": "ro"}},
        **devices)
    try:
        for chunk in container.logs(stream=True, follow=True):
            for line in chunk.decode(errors="replace").splitlines():
                log(line)
        return container.wait()["StatusCode"]
    finally:
        container.remove(force=True)
