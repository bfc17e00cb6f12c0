"""Compile images: content-addressed tags, builds through the Docker SDK, and a local Debian base
for machines that reach no image registry.

Tag = sha256 of everything the image is made of (docker/, pins/, pyproject.toml, the tritonforge package:
tritonforge/, pipeline/, runtime/); a build is skipped when an image with that tag exists.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from tritonforge.pipeline.compile.pin import pinned_version
from tritonforge.pipeline.errors import PipelineError

ROOT = Path(__file__).resolve().parents[2]
IMAGE_INPUTS = ("docker", "pins", "pyproject.toml", "tritonforge", "pipeline", "runtime")
LOCAL_BASE = "tritonforge/debian-base:bookworm"
HOST_CA_DIRS = ("/usr/local/share/ca-certificates",)
HOST_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

Log = Callable[[str], None]


def _connect():
    """(client, None) when a Docker engine answers, else (None, why not)."""
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        import docker

        c = docker.from_env(timeout=600)
        c.ping()
        return c, None
    except Exception as exc:
        return None, f"no Docker engine reachable at {where} ({type(exc).__name__})"


def client():
    """A Docker client that answers, or a PipelineError saying why not."""
    c, why = _connect()
    if c is None:
        raise PipelineError(f"{why}; start dockerd (scripts/setup does) or use --runner local")
    return c


def engine_unavailable() -> str | None:
    """Why no Docker engine can be used here (None: one answers)."""
    return _connect()[1]


def _input_files(root: Path = ROOT) -> list[Path]:
    files = []
    for item in IMAGE_INPUTS:
        p = root / item
        if p.is_file():
            files.append(p)
        else:
            files += [f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
    return sorted(files)


def content_tag(platform: str, root: Path = ROOT, triton: str | None = None) -> str:
    """sha256 of the image's inputs and the Triton release it installs (`triton`, else the pin's)."""
    h = hashlib.sha256()
    for f in _input_files(root):
        h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    if triton:  # the pin's own image keeps the tag its inputs give
        h.update(b"triton==" + triton.encode() + b"\0")
    return f"tritonforge/{platform}:{h.hexdigest()[:16]}"


def _context(tmp: Path, root: Path = ROOT) -> Path:
    """Build context: the image inputs plus certs/ from the host CA store (never committed)."""
    ctx = tmp / "context"
    for f in _input_files(root):
        dest = ctx / f.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dest)
    certs = ctx / "certs"
    certs.mkdir()
    n = 0
    for d in HOST_CA_DIRS:
        for crt in Path(d).rglob("*.crt") if Path(d).is_dir() else []:
            shutil.copy(crt, certs / f"host-{n}-{crt.name}")
            n += 1
    (certs / "README").write_text("host CA certificates for pip inside the build stage\n")
    return ctx


def _revision(root: Path = ROOT) -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def image_exists(c, tag: str) -> bool:
    import docker

    try:
        c.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def base_image(c, platform: str, log: Log) -> str:
    """The upstream base named in the Dockerfile if it can be had, else the local Debian base."""
    text = (ROOT / "docker" / f"{platform}.Dockerfile").read_text()
    upstream = next(line.split("=", 1)[1].strip() for line in text.splitlines() if line.startswith("ARG BASE_IMAGE="))
    if image_exists(c, upstream):
        return upstream
    try:
        repo, _, tag = upstream.rpartition(":")
        log(f"pulling {upstream}")
        c.images.pull(repo, tag=tag)
        return upstream
    except Exception as exc:
        log(f"cannot pull {upstream} ({type(exc).__name__}); using the local base {LOCAL_BASE}")
    ensure_local_base(c, log)
    return LOCAL_BASE


def ensure_local_base(c, log: Log) -> str:
    """Debian minbase made with debootstrap and imported, unless it already exists."""
    if not image_exists(c, LOCAL_BASE):
        debootstrap_image(c, LOCAL_BASE, "bookworm", log)
    return LOCAL_BASE


def debootstrap_image(c, tag: str, suite: str, log: Log, include: tuple[str, ...] = (),
                      mirror: str | None = None) -> str:
    """An image `tag` of Debian `suite` (minbase, plus the packages `include` names) made with debootstrap
    from this machine's Debian mirror and imported: no image registry is needed."""
    if shutil.which("debootstrap") is None:
        raise PipelineError(f"making {tag} needs debootstrap (apt-get install debootstrap; scripts/setup does)")
    if os.geteuid() != 0:
        raise PipelineError(f"making {tag} with debootstrap needs root")
    mirror = mirror or _debian_mirror()
    with tempfile.TemporaryDirectory(prefix="tf-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        extra = [f"--include={','.join(include)}"] if include else []
        log(f"debootstrap --variant=minbase {' '.join(extra)} {suite} from {mirror}".replace("  ", " "))
        proc = subprocess.run(["debootstrap", "--variant=minbase", *extra, suite, str(rootfs), mirror],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise PipelineError(f"debootstrap of {suite} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
        tar = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tar), "."], check=True)
        repo, _, name = tag.partition(":")
        log(f"importing {tag}")
        c.api.import_image_from_file(str(tar), repository=repo, tag=name)
    return tag


def _debian_mirror() -> str:
    for src in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]:
        if not src.is_file():
            continue
        for line in src.read_text().splitlines():
            parts = line.split()
            if line.startswith("URIs:") and "debian" in line and "security" not in line:
                return parts[1]
            if line.startswith("deb ") and "debian" in line and "security" not in line:
                return parts[1]
    return "http://deb.debian.org/debian"


def _known(platform: str) -> None:
    if platform not in ("cuda", "rocm"):
        raise PipelineError(f"unknown platform '{platform}'")


def build_image(platform: str, log: Log = print, force: bool = False, triton: str | None = None) -> str:
    """Build (or reuse) the compile image for `platform`; returns its tag. Logs stream through `log`.
    `triton`: a version other than the pin's (pin-move builds the candidate's image so)."""
    _known(platform)
    c = client()
    tag = content_tag(platform, triton=triton)
    if image_exists(c, tag) and not force:
        log(f"image {tag} exists (inputs unchanged): build skipped")
        return tag
    import docker

    try:
        return _build(c, platform, tag, log, triton)
    except docker.errors.DockerException as exc:
        raise PipelineError(f"building {tag} failed: {exc}") from None


def prune_images(platform: str, log: Log = print, dry_run: bool = False, triton: str | None = None) -> list[str]:
    """Remove the platform's compile images tagged with a content hash other than today's (and `triton`'s image,
    kept too): every change to the inputs makes a new ~1.5 GB image, and nothing else removes the old ones. Tags
    that are not content hashes are not ours to judge and stay; so does an image a container still uses, named.
    Returns the tags removed (or, with `dry_run`, that would be)."""
    import docker

    _known(platform)
    c = client()
    current = content_tag(platform)
    repo = current.rpartition(":")[0]
    keep = {current} | ({content_tag(platform, triton=triton)} if triton else set())
    stale = sorted(t for img in c.images.list(name=repo) for t in img.tags
                   if re.fullmatch(re.escape(repo) + r":[0-9a-f]{16}", t) and t not in keep)
    removed = []
    for tag in stale:
        if not dry_run:
            try:
                c.images.remove(tag)
            except docker.errors.APIError as exc:  # a container of it still exists: docker keeps it, and so do we
                log(f"kept {tag}: {exc.explanation or exc}")
                continue
        log(f"{'would remove' if dry_run else 'removed'} {tag}")
        removed.append(tag)
    log(f"{len(removed)} stale {platform} image(s) {'to remove' if dry_run else 'removed'}; kept "
        f"{', '.join(sorted(keep))}")
    return removed


def _build(c, platform: str, tag: str, log: Log, triton: str | None = None) -> str:
    base = base_image(c, platform, log)
    with tempfile.TemporaryDirectory(prefix="tf-image-") as tmp:
        ctx = _context(Path(tmp))
        log(f"building {tag} FROM {base}")
        stream = c.api.build(path=str(ctx), dockerfile=f"docker/{platform}.Dockerfile", tag=tag, rm=True,
                             forcerm=True, network_mode="host", decode=True,
                             buildargs={"BASE_IMAGE": base, "REVISION": _revision(),
                                        "TRITON_VERSION": triton or pinned_version()})
        tail: list[str] = []
        for chunk in stream:
            if "stream" in chunk:
                for line in chunk["stream"].splitlines():
                    if line.strip():
                        log(line)
                        tail = (tail + [line])[-30:]
            if "error" in chunk:
                raise PipelineError(f"building {tag} failed: {chunk['error'].strip()}\n" + "\n".join(tail))
    return tag
