"""Versioned, immutable releases: publish a dist/ (and tune caches) to a store; fetch one build back.

Store layout (the manifest is the only thing that makes a version exist, and it is written last):
    blobs/sha256/<hex>                    every file, content-addressed, create-only
    versions/<version>/manifest.json      version, commit, triton, builds (profile, images), each file's
                                          path/size/sha256: <platform>/<arch>/... for the ort profile,
                                          full/<platform>/<arch>/... for the full one
    versions/<version>/signatures/...     Ed25519 signatures of the manifest's bytes (pipeline/release/signing.py),
                                          written before the manifest
    versions/<version>/yank.json          the version is withdrawn: kept and fetchable by name, never
                                          picked as the newest
    locks/                                publishers' and gc's locks (pipeline/release/locks.py)

A re-publish with identical files succeeds without writing; with different files it is refused. Of
concurrent publishers of one version the first manifest wins. A publish killed midway leaves blobs but
no manifest: the version stays invisible, and running it again completes it.

`invoke publish`, `fetch`, `versions`, `yank` and `lock` are the commands over these functions.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.lockfile import check_against, make_lock, read_lock, write_lock
from tritonforge.pipeline.release.stores import Conflict, check_key, open_store
from tritonforge.pipeline.scripts.profiles import root, store_prefix

from tritonforge.artifact_format import (
    FILES,
    LIBRARY_NAME,
    LIBRARY_TUNE_NAME,
    MANIFEST_NAME,
    FormatError,
    read_kernels_json,
)
from tritonforge.atomic import replace_dir

SCHEMA = "tritonforge.release/1"
WHEELS = "wheels"  # <dist>/wheels/ (invoke wheel) and a version's wheels/ in the store
ORT_SOURCES = "ort-sources"  # <dist>/ort-sources/ (invoke ort-sources) and a version's ort-sources/ in the store
ARTIFACT_FILES = FILES
CMAKE_FILE = "tritonforge-kernels.cmake"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_key(version: str) -> str:
    return f"versions/{check_version(version)}/manifest.json"


VERSION_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def check_version(version: str) -> str:
    """A version names one directory of the store: 1 to 64 of [A-Za-z0-9._+-], not starting with . + -."""
    if not isinstance(version, str) or not VERSION_RE.fullmatch(version):
        raise PipelineError(f"bad version {version!r}: a version is 1 to 64 characters of [A-Za-z0-9._+-] "
                            "starting with a letter or digit (e.g. 1.4.0, v1.4.0-rc1)")
    return check_key(version)


def _read_build_manifest(path: Path) -> dict:
    """A kernels.json with what publishing reads from it, or an error naming the file."""
    try:
        return read_kernels_json(path)
    except FormatError as exc:
        raise PipelineError(str(exc)) from None


def collect(dist: Path, tune: Path | None, profiles=("ort",), version: str | None = None) -> tuple[dict[str, bytes],
                                                                                                   dict]:
    """{store path: bytes} for every built platform/arch of each profile (checked against its kernels.json),
    the tune caches made for those archives, the `tritonforge_ort` wheels of `version` under
    `<dist>/wheels/` (invoke wheel), and the build info (profile, images) per build."""
    files: dict[str, bytes] = {}
    builds: dict[str, dict] = {}
    for profile in profiles:
        for kj in sorted(root(dist, profile).glob(f"*/*/{MANIFEST_NAME}")):
            d = kj.parent
            rel = f"{store_prefix(profile)}{d.parent.name}/{d.name}"
            doc = _read_build_manifest(kj)
            if doc.get("profile", "full") != profile:
                raise PipelineError(f"{d} holds a {doc.get('profile', 'full')} build where the {profile} profile's "
                                    f"builds go; rebuild it with --profile {profile}")
            for name in ARTIFACT_FILES:
                if not (d / name).is_file():
                    raise PipelineError(f"{d}: missing {name}")
                files[f"{rel}/{name}"] = (d / name).read_bytes()
            for part in ("archive", "header"):
                if _sha(files[f"{rel}/{doc[part]['file']}"]) != doc[part]["sha256"]:
                    raise PipelineError(f"{d}: {doc[part]['file']} does not match its kernels.json; rebuild")
            lib = d / LIBRARY_NAME  # the custom-op library of a CUDA multi build goes with it
            if lib.is_file():
                data = lib.read_bytes()
                if doc["archive"]["sha256"].encode() not in data:  # the library records the archive it links
                    raise PipelineError(f"{lib}: built from another archive than {d}'s; rebuild it (invoke ortlib)")
                files[f"{rel}/{LIBRARY_NAME}"] = data
                if (d / LIBRARY_TUNE_NAME).is_file():  # its choices from the GPU runners' tune caches
                    files[f"{rel}/{LIBRARY_TUNE_NAME}"] = (d / LIBRARY_TUNE_NAME).read_bytes()
            image = d.parent / f"{d.name}.image.json"  # written by the docker runner
            builds[rel] = {"profile": profile, "triton_version": doc["triton_version"],
                           "archive_sha256": doc["archive"]["sha256"], "kernels": len(doc["kernels"]),
                           "image": json.loads(image.read_text()) if image.is_file() else None}
    if not files:
        where = " or ".join(f"{root(dist, p)}/<platform>/<arch>/{MANIFEST_NAME}" for p in profiles)
        raise PipelineError(f"nothing to publish (expected {where})")
    files.update(_tune_caches(tune, builds))
    from tritonforge.pipeline.package.wheel import wheel_version

    try:
        named = wheel_version(version) if version else None
    except PipelineError:  # a version pip cannot read has no wheel
        named = None
    for wheel in sorted((dist / WHEELS).glob(f"tritonforge_ort-{named}-*.whl")) if named else []:
        files[f"{WHEELS}/{wheel.name}"] = wheel.read_bytes()
    files.update(_ort_sources(dist / ORT_SOURCES))
    return files, builds


def _ort_sources(d: Path) -> dict[str, bytes]:
    """`invoke ort-sources`' output (ONNX Runtime's SparseAttention folders), each file checked against its
    ort-sources.json, or nothing where it was not generated."""
    from tritonforge.pipeline.package.ort_sources import MANIFEST_NAME as SOURCES_MANIFEST
    from tritonforge.pipeline.package.ort_sources import check_folder

    if not (d / SOURCES_MANIFEST).is_file():
        return {}
    doc = check_folder(d)
    files = {f"{ORT_SOURCES}/{SOURCES_MANIFEST}": (d / SOURCES_MANIFEST).read_bytes()}
    files.update({f"{ORT_SOURCES}/{rel}": (d / rel).read_bytes() for rel in doc["files"]})
    return files


def _tune_caches(tune: Path | None, builds: dict) -> dict[str, bytes]:
    """Each tune cache under tune/<platform>/<arch>/ goes with the build whose archive it was made for."""
    out = {}
    for cache in sorted(tune.glob("*/*/*.json")) if tune and tune.is_dir() else []:
        target = f"{cache.parent.parent.name}/{cache.parent.name}"
        made_for = json.loads(cache.read_text()).get("validators", {}).get("archive_sha256")
        owner = [rel for rel, b in builds.items() if rel.endswith(target) and b["archive_sha256"] == made_for]
        if not owner:
            raise PipelineError(f"tune cache {cache} was made for another archive ({made_for}) than any {target} "
                                "build being published; tune again or remove it")
        out[f"{owner[0]}/tune/{cache.name}"] = cache.read_bytes()
    return out


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _same_release(a: dict, b: dict) -> bool:
    return a.get("files") == b.get("files")


def publish(store, version: str, dist: Path | str, tune: Path | str | None = None, log=print,
            manifest_out: Path | str | None = None, profiles=("ort",), sign_key: str | None = None) -> str:
    """Returns "published" or "identical"; raises on a conflicting version. `sign_key` (a PEM file or
    text) signs the manifest. `manifest_out` receives a copy of the manifest now in the store (the
    subject of a provenance attestation), and its signature beside it as `<manifest_out>.sig`."""
    from tritonforge.pipeline.release.signing import load_private

    private = load_private(sign_key) if sign_key else None  # a bad key fails before anything is written
    result, signature = _publish(store, version, dist, tune, log, profiles, private)
    if manifest_out:
        Path(manifest_out).write_bytes(store.get(manifest_key(version)))
        if signature:
            Path(f"{manifest_out}.sig").write_bytes(signature)
    return result


def _publish(store, version: str, dist: Path | str, tune: Path | str | None, log, profiles, private):
    from tritonforge.pipeline.release.locks import PublishLock
    from tritonforge.pipeline.release.signing import sign, signature_key

    key = manifest_key(version)
    files, builds = collect(Path(dist), Path(tune) if tune else None, profiles, version)
    entries = [{"path": p, "size": len(b), "sha256": _sha(b)} for p, b in sorted(files.items())]
    triton = sorted({b["triton_version"] for b in builds.values()})
    manifest = {"schema": SCHEMA, "version": version, "git_commit": _git_commit(), "triton_version": triton[0]
                if len(triton) == 1 else triton, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(),
                "builds": builds, "files": entries}

    def signed(data: bytes) -> bytes | None:
        if private is None:
            return None
        kid, doc = sign(private, data)
        store.create(signature_key(f"versions/{version}", data, kid), doc)  # before the manifest is visible
        return doc

    existing = store.get(key)
    if existing is not None:  # identical content (else this raises): sign what is there, as a re-run completes
        return _compare_existing(store, version, existing, manifest), signed(existing)
    with PublishLock(store, log=log) as lock:  # a concurrent gc keeps its hands off the blobs used here
        for i, e in enumerate(entries, 1):
            lock.heartbeat()
            created = store.create(f"blobs/sha256/{e['sha256']}", files[e["path"]])
            log(f"uploaded {i}/{len(entries)} {e['path']} ({e['size']} B{'' if created else ', already stored'})")
        data = (json.dumps(manifest, indent=1) + "\n").encode()
        signature = signed(data)
        try:
            store.create(key, data)
        except Conflict:
            existing = store.get(key)
            result = _compare_existing(store, version, existing, manifest)
            return result, signed(existing)
    log(f"published {version}: {len(entries)} files to {store.url}" + (" (signed)" if signature else ""))
    return "published", signature


def _compare_existing(store, version, existing: bytes, manifest: dict) -> str:
    if _same_release(json.loads(existing), manifest):
        return "identical"
    raise PipelineError(f"version {version} is already published in {store.url} with different content; "
                        "published versions are immutable: publish a new version")


def versions(store, keys=None) -> list[str]:
    """Published versions, oldest first (numeric parts compare as numbers, a pre-release before its release);
    `keys`: the store's keys under versions/, when already listed."""
    out = []
    for key in store.list("versions") if keys is None else keys:
        parts = key.split("/")
        if len(parts) == 3 and parts[2] == "manifest.json":
            out.append(parts[1])
    return sorted(out, key=version_key)


def version_key(version: str) -> tuple:
    m = re.fullmatch(r"v?(\d+(?:\.\d+)*)(.*)", version)
    if not m:
        return ((), 0, version)
    return (tuple(int(x) for x in m.group(1).split(".")), 0 if m.group(2) else 1, m.group(2))


def yank_key(version: str) -> str:
    return f"versions/{check_version(version)}/yank.json"


def listing(store) -> list[tuple[str, dict | None]]:
    """Every published version, oldest first, with its yank record or None: one listing of the store,
    and a read only for the versions that are yanked."""
    keys = set(store.list("versions"))
    return [(v, yanked(store, v) if yank_key(v) in keys else None) for v in versions(store, keys)]


def yanked(store, version: str) -> dict | None:
    """{reason, yanked_at} when the version is yanked, else None."""
    data = store.get(yank_key(version))
    return json.loads(data) if data is not None else None


def yank(store, version: str, reason: str) -> dict:
    """Mark a published version as withdrawn (create-only: a yank is not changed or undone here)."""
    if not reason.strip():
        raise PipelineError("a yank needs a reason (--reason TEXT): consumers are told it")
    read_manifest(store, version)  # only a published version can be yanked
    doc = {"version": version, "reason": reason.strip(),
           "yanked_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    try:
        store.create(yank_key(version), (json.dumps(doc, indent=1) + "\n").encode())
    except Conflict:
        raise PipelineError(f"version {version} is already yanked: {yanked(store, version)['reason']}") from None
    return doc


def resolve_version(store, version: str) -> str:
    """`latest`: the newest version that is not yanked; any other name as it is."""
    if version != "latest":
        return check_version(version)
    for v in reversed(versions(store)):
        if yanked(store, v) is None:
            return v
    raise PipelineError(f"no version in {store.url} to call latest (none published, or every one yanked)")


def read_manifest(store, version: str) -> dict:
    data = store.get(manifest_key(version))
    if data is None:
        known = ", ".join(versions(store)) or "none"
        raise PipelineError(f"version {version} is not published in {store.url} (published: {known})")
    doc = json.loads(data)
    if doc.get("schema") != SCHEMA:
        raise PipelineError(f"{store.url}/{manifest_key(version)}: not a {SCHEMA} manifest")
    return doc


DRIVER = {"cuda": ("CUDAToolkit", "CUDA::cuda_driver"), "rocm": ("hip", "hip::host")}


def cmake_text(version: str, build: str, platform: str, digests: dict[str, str] | None = None) -> str:
    package, driver = DRIVER.get(platform, DRIVER["cuda"])
    checks = "".join(f"""file(SHA256 "${{CMAKE_CURRENT_LIST_DIR}}/{name}" _tf_sha)
if(NOT _tf_sha STREQUAL "{sha}")
  message(FATAL_ERROR "tritonforge: {name} is not the fetched file (sha256 ${{_tf_sha}}, expected {sha})")
endif()
if(DEFINED TRITONFORGE_LOCK)
  string(JSON _tf_locked ERROR_VARIABLE _tf_err GET "${{_tf_lock}}" files {name} sha256)
  if(NOT _tf_locked STREQUAL "{sha}")
    message(FATAL_ERROR "tritonforge: {name} does not match the lock ${{TRITONFORGE_LOCK}} (${{_tf_locked}})")
  endif()
endif()
""" for name, sha in sorted((digests or {}).items()))
    return f"""# Generated by tritonforge fetch: version {version}, {build}. Include it, then link
# tritonforge::kernels into the provider: it adds the header's directory, USE_TRITON_KERNEL, the
# archive under --whole-archive (nothing references the blobs, so the linker would drop them), and the
# driver library ORT's provider links ({driver}) where CMake finds it. At configure time every file is
# checked against the sha256 fetched, and against a lock file when TRITONFORGE_LOCK names one.
if(TARGET tritonforge_kernels)
  return()
endif()
if(DEFINED TRITONFORGE_LOCK)
  if(CMAKE_VERSION VERSION_LESS 3.19)
    message(FATAL_ERROR "tritonforge: checking TRITONFORGE_LOCK needs CMake 3.19 or newer (string(JSON))")
  endif()
  file(READ "${{TRITONFORGE_LOCK}}" _tf_lock)
endif()
{checks}set(TRITONFORGE_KERNELS_DIR "${{CMAKE_CURRENT_LIST_DIR}}")
set(TRITONFORGE_KERNELS_ARCHIVE "${{CMAKE_CURRENT_LIST_DIR}}/triton_kernel_infos.a")
add_library(tritonforge_kernels INTERFACE)
target_include_directories(tritonforge_kernels INTERFACE "${{TRITONFORGE_KERNELS_DIR}}")
target_compile_definitions(tritonforge_kernels INTERFACE USE_TRITON_KERNEL)
target_link_libraries(tritonforge_kernels INTERFACE
  "-Wl,--whole-archive" "${{TRITONFORGE_KERNELS_ARCHIVE}}" "-Wl,--no-whole-archive")
if(NOT TARGET {driver})
  find_package({package} QUIET)
endif()
if(TARGET {driver})
  target_link_libraries(tritonforge_kernels INTERFACE {driver})
else()
  message(STATUS "tritonforge: {driver} not found; the provider must link the driver library itself")
endif()
add_library(tritonforge::kernels ALIAS tritonforge_kernels)
"""


def read_verified(store, version: str, trust: str | None, log=print) -> tuple[dict, bytes]:
    """The manifest of a version (and its bytes), its signature checked against `trust` (a public key
    file or PEM text) when one is given; a yanked version is said so."""
    from tritonforge.pipeline.release.signing import load_public, verify

    doc = read_manifest(store, version)
    data = store.get(manifest_key(version))
    if trust:
        sigs = {k: store.get(k) for k in store.list(f"versions/{version}/signatures")}
        kid = verify(load_public(trust), data, sigs, f"version {version} in {store.url}")
        log(f"manifest of {version} signed by trusted key {kid}")
    y = yanked(store, version)
    if y is not None:
        log(f"warning: version {version} is yanked ({y['yanked_at']}): {y['reason']}")
    return doc, data


def fetch(store, version: str, platform: str, arch: str, dest: Path | str, log=print, profile: str = "ort",
          trust: str | None = None, lock: dict | None = None) -> Path:
    """Download one build of a version into dest, verified (and, with `trust`, its manifest's signature;
    with `lock`, the exact bytes the lock names); dest changes only if everything checks."""
    doc, data = read_verified(store, version, trust, log)
    build = f"{store_prefix(profile)}{platform}/{arch}"
    check_key(build)
    wanted = [e for e in doc["files"] if e["path"].startswith(build + "/")]
    if not wanted:
        raise PipelineError(f"version {version} has no {build} (it has: {', '.join(sorted(doc['builds']))})")
    if lock is not None:

        check_against(lock, data, {e["path"][len(build) + 1:]: e for e in wanted})
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.fetch-", dir=dest.parent))
    try:
        for e in wanted:
            data = store.get(f"blobs/sha256/{e['sha256']}")
            if data is None:
                raise PipelineError(f"{store.url}: {e['path']} of {version} is missing (blob {e['sha256']})")
            if len(data) != e["size"] or _sha(data) != e["sha256"]:
                raise PipelineError(f"{store.url}: {e['path']} of {version} does not match its manifest "
                                    f"sha256 (got {_sha(data)}); refusing it")
            target = staging / e["path"][len(build) + 1:]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            log(f"verified {e['path']} ({e['size']} B)")
        depth = build.count("/") + 1  # the build's own files, not its tune/ caches
        digests = {e["path"][len(build) + 1:]: e["sha256"] for e in wanted if e["path"].count("/") == depth}
        (staging / CMAKE_FILE).write_text(cmake_text(version, build, platform, digests))
        (staging / "release.json").write_text(json.dumps({k: doc[k] for k in ("version", "git_commit",
                                                                              "triton_version")}, indent=1) + "\n")
        replace_dir(staging, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest



def fetch_wheels(store, version: str, dest: Path | str, log=print, trust: str | None = None) -> list[Path]:
    """The version's `tritonforge_ort` wheels into dest (a directory; files added beside what is there),
    each verified against the manifest (and, with `trust`, the manifest's signature) before it is written."""
    return _fetch_under(store, version, WHEELS, dest, log, trust,
                        f"has no wheel (publish it after `invoke wheel --version {version}`)", keep_tree=False)


def fetch_ort_sources(store, version: str, dest: Path | str, log=print, trust: str | None = None) -> list[Path]:
    """The version's ONNX Runtime SparseAttention folders (invoke ort-sources) into dest, verified the same
    way; dest then holds sparse_attention_v1/, sparse_attention_v2/, the patch and ort-sources.json."""
    return _fetch_under(store, version, ORT_SOURCES, dest, log, trust,
                        "has no ORT sources (publish it after `invoke ort-sources`)", keep_tree=True)


def _fetch_under(store, version: str, prefix: str, dest: Path | str, log, trust, missing: str,
                 keep_tree: bool) -> list[Path]:
    from tritonforge.atomic import write_bytes

    doc, _ = read_verified(store, version, trust, log)
    wanted = [e for e in doc["files"] if e["path"].startswith(f"{prefix}/")]
    if not wanted:
        raise PipelineError(f"version {version} {missing}")
    blobs = {}
    for e in wanted:  # every one checked before any is written
        data = store.get(f"blobs/sha256/{e['sha256']}")
        if data is None or len(data) != e["size"] or _sha(data) != e["sha256"]:
            raise PipelineError(f"{store.url}: {e['path']} of {version} is missing or does not match its manifest "
                                "sha256; refusing it")
        blobs[e["path"]] = data
    out = []
    for path, data in blobs.items():
        rel = path[len(prefix) + 1:] if keep_tree else Path(path).name
        out.append(write_bytes(Path(dest) / rel, data))
        log(f"verified {path} ({len(data)} B)")
    return out


def lock_build(store, version: str, platform: str, arch: str, profile: str, out: Path | str,
               trust: str | None = None, log=print) -> dict:
    """Write the lock of one build of a version (`latest`: the newest not yanked), its manifest's signature
    checked first when `trust` names a key."""
    version = resolve_version(store, version)
    manifest, data = read_verified(store, version, trust, log)
    lock = make_lock(store, version, platform, arch, profile, manifest, data)
    write_lock(lock, out)
    return lock


def fetch_locked(lock_path: Path | str, dest: Path | str, store=None, trust: str | None = None, log=print) -> Path:
    """Exactly the locked bytes into dest (from the lock's store unless another is given), or an error
    and dest untouched."""
    lock = read_lock(lock_path)
    store = store or open_store(lock["store"])
    return fetch(store, lock["version"], lock["platform"], lock["arch"], dest, log, lock["profile"], trust, lock)
