"""One archive for every GPU of a platform: per-arch builds merged into `<platform>/multi/`.

ORT's loader takes one archive and throws on a blob it cannot load, so each blob of the multi build is a
container the driver picks from at load time (pipeline/package/containers.py): on CUDA a fatbin of every arch's
cubin plus the newest arch's portable PTX and the oldest arch's PTX (which the driver JIT-compiles for a GPU
no cubin runs on: sm_103 or sm_110 beside sm_100a and sm_120a cubins, say), on ROCm an offload bundle of
every gfx target's code object.

The header stays ORT's: one entry per kernel, so every arch must launch it the same way (function name,
parameters, constants, warps); `shared` is the largest across archs. A kernel built for some archs only
(`MIN_SM`, `MAX_SM`, `PLATFORMS`) is left out, and kernels.json says so. Only what the per-arch builds
hold is read (blobs from their archives, PTX from their ptx/): merging builds made on different machines
gives the same bytes as one build of every arch.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tritonforge.pipeline.compile.targets import parse_target
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package import embed, manifest
from tritonforge.pipeline.package.containers import fatbin, offload_bundle
from tritonforge.pipeline.package.outputs import artifact_paths, package

from tritonforge.artifact_format import MANIFEST_NAME, MULTI
from tritonforge.atomic import replace_dir

CONTAINER_EXT = {"cuda": "fatbin", "hip": "hipfb"}
# What every arch's entry of one kernel must agree on: ORT packs one struct and launches one way.
SAME_LAUNCH = ("group", "script", "func_name", "sig", "params", "constants", "num_warps", "warp_size", "args_size")


@dataclass
class MultiReport:
    platform: str
    archs: list[str]
    kernels: int = 0
    left_out: list[dict] = field(default_factory=list)  # {name, group, archs}
    archive_bytes: int = 0
    paths: dict[str, Path] = field(default_factory=dict)

    def counts(self) -> dict:
        return {"platform": self.platform, "archs": self.archs, "kernels": self.kernels, "left_out": self.left_out}

    def warnings(self) -> list[str]:
        """Lines naming every kernel left out, by group and the archs it was built for."""
        if not self.left_out:
            return []
        by: dict[tuple, list[str]] = {}
        for k in self.left_out:
            by.setdefault((k["group"], tuple(k["archs"])), []).append(k["name"])
        return ([f"{self.platform}/{MULTI} leaves out {len(self.left_out)} kernels not built for every arch of "
                 f"{', '.join(self.archs)}:"] +
                [f"  {g} (only {', '.join(a)}): {', '.join(names)}" for (g, a), names in by.items()])


@dataclass
class _Part:
    path: Path
    arch: str  # arch_name: sm_90, gfx942
    doc: dict
    blobs: dict[str, bytes]
    by_name: dict[str, dict]


def arch_key(arch_name: str) -> tuple:
    """Oldest first: CUDA by compute capability (sm_100 after sm_90), ROCm by name."""
    t = parse_target(arch_name)
    return (t.backend, int(t.arch) if t.backend == "cuda" else 0, t.arch)


def _read_part(d: Path) -> _Part:
    from tritonforge.runtime.artifacts import ArtifactError, load_artifacts

    try:
        art = load_artifacts(d)
    except (ArtifactError, KeyError, TypeError) as exc:
        raise PipelineError(f"{d}: not a verified per-arch build ({exc})") from None
    arch = art.manifest["target"]["arch_name"]
    if arch == MULTI:
        raise PipelineError(f"{d}: already a multi-arch build; merge the per-arch builds")
    return _Part(d, arch, art.manifest, art.blobs, {k["name"]: k for k in art.manifest["kernels"]})


def _same(parts: list[_Part], what: str, get) -> None:
    values = {p.arch: get(p.doc) for p in parts}
    if len({json.dumps(v, sort_keys=True) for v in values.values()}) > 1:
        raise PipelineError(f"the builds to merge differ in {what}: " +
                            ", ".join(f"{a} ({p.path}): {v}" for (a, v), p in zip(values.items(), parts)))


def _check_launch(name: str, entries: list[tuple[str, dict]]) -> None:
    for f in SAME_LAUNCH:
        values = [(arch, e[f]) for arch, e in entries]
        if any(v != values[0][1] for _, v in values[1:]):
            said = "; ".join(f"{arch}: {v}" for arch, v in values)
            raise PipelineError(f"kernel {name}: {f} differs across archs ({said}); one header entry cannot "
                                "launch it on every arch")
    hidden = [(arch, [{k: h[k] for k in ("name", "offset", "size")} for h in e["hidden_params"]])
              for arch, e in entries]
    if any(h != hidden[0][1] for _, h in hidden[1:]):
        raise PipelineError(f"kernel {name}: hidden parameters differ across archs "
                            f"({'; '.join(f'{a}: {h}' for a, h in hidden)})")


def _ptx(part: _Part, entry: dict) -> tuple[str, str] | None:
    info = entry.get("ptx")
    if not info:
        return None
    path = part.path / info["file"]
    try:
        text = path.read_text()
    except OSError:
        raise PipelineError(f"{path}: missing; merging needs the PTX a build writes beside its kernels.json "
                            "(keep the build's ptx/ directory)") from None
    if hashlib.sha256(text.encode()).hexdigest() != info["sha256"]:
        raise PipelineError(f"{path}: sha256 differs from {part.path / MANIFEST_NAME}")
    return info["target"], text


def _portable(newest: _Part, names: list[str], checks: Path | None) -> dict[str, tuple[tuple[str, str] | None, str]]:
    """{kernel: ((target, PTX) a newer GPU can JIT-compile or None, why none)} from the newest arch's build:
    Triton's sm_90a-and-up PTX retargeted where ptxas still takes it (one ptxas run a kernel, in parallel)."""
    from tritonforge.pipeline.compile.compiler import portable_ptx

    def one(name):
        raw = _ptx(newest, newest.by_name[name])
        if raw is None:
            return None, newest.by_name[name].get("ptx_note") or f"no PTX in the {newest.arch} build"
        text, target, note = portable_ptx(raw[1], name, checks)
        return ((target, text) if text is not None else None), note

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return dict(zip(names, pool.map(one, names)))


def _content(kind: str, arch: str, data: bytes) -> dict:
    return {"kind": kind, "arch": arch, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _merged(name: str, parts: list[_Part], index: int, backend: str, host: str,
            portable: tuple[tuple[str, str] | None, str] | None = None) -> tuple[dict, bytes]:
    """One kernel of `parts` (the per-arch builds that hold it, oldest first) as one entry and blob: on CUDA a
    fatbin of their cubins (with `portable`'s PTX and the oldest part's, when given), on ROCm an offload
    bundle."""
    ext = CONTAINER_EXT[backend]
    entries = [(p.arch, p.by_name[name]) for p in parts]
    _check_launch(name, entries)
    if backend == "cuda":
        cubins = [(e["binary"]["arch"], p.blobs[name]) for p, (_, e) in zip(parts, entries)]
        newest, ptx_note = portable or (None, "")
        ptx = [newest] if newest else []
        oldest = _ptx(parts[0], entries[0][1]) if portable is not None else None
        if oldest and not oldest[0].endswith("a") and oldest[0] not in [t for t, _ in ptx]:
            ptx.append(oldest)  # Triton's PTX below sm_90 is portable as written
        blob = fatbin(name, cubins, ptx)
        contents = [_content("cubin", a, b) for a, b in cubins]
        contents += [_content("ptx", t, text.encode()) for t, text in ptx]
    else:
        objs = [(p.arch, p.blobs[name]) for p in parts]
        blob = offload_bundle(objs, host)
        contents = [_content("hsaco", a, b) for a, b in objs]
    base = dict(parts[-1].by_name[name])
    base.pop("ptx", None)
    symbol = embed.symbol_base(name, ext)
    notes = list(dict.fromkeys(n for _, e in entries for n in e["ort_notes"]))
    hidden = [dict(h, **{f: max(e["hidden_params"][i][f] for _, e in entries)
                         for f in ("scratch_size", "scratch_align")}) for i, h in enumerate(base["hidden_params"])]
    base.update(index=index, target=f"{backend}:{MULTI}", symbol=f"{symbol}_start", symbol_end=f"{symbol}_end",
                binary={"format": ext, "size": len(blob), "sha256": hashlib.sha256(blob).hexdigest()},
                contents=contents, shared=max(e["shared"] for _, e in entries), hidden_params=hidden,
                ort_launchable=not notes, ort_notes=notes)
    if backend == "cuda" and not newest:
        base["ptx_note"] = ptx_note or "built for some archs only: no portable PTX"
    return base, blob


def partial(multi_dir: Path) -> tuple[list[dict], list[tuple[str, str, bytes]], dict[str, dict]]:
    """The kernels `multi_dir` leaves out because some of its archs cannot build them (MIN_SM, MAX_SM), each
    as one blob of the archs that do, read from the per-arch builds beside it: (entries, blobs as (name,
    ext, bytes), {group: contract}). ORT's header needs every kernel launchable on every arch; the custom-op
    library does not (a device loads a blob with its arch, or skips it), so it links these too. Empty when
    nothing is left out or the per-arch builds are not beside it (a multi fetched alone)."""
    from tritonforge import artifact_format

    doc = artifact_format.read_kernels_json(multi_dir)
    left = doc.get("left_out") or []
    archs = doc["target"].get("archs") or []
    dirs = [Path(multi_dir).parent / a for a in archs]
    if not left or not all((d / MANIFEST_NAME).is_file() for d in dirs):
        return [], [], {}
    parts = sorted((_read_part(d) for d in dirs), key=lambda p: arch_key(p.arch))
    backend, host = doc["target"]["backend"], doc["host"]
    entries, blobs, contracts = [], [], {}
    for k in left:
        having = [p for p in parts if k["name"] in p.by_name]
        if not having:
            continue
        entry, blob = _merged(k["name"], having, len(doc["kernels"]) + len(entries), backend, host)
        entries.append(entry)
        blobs.append((k["name"], CONTAINER_EXT[backend], blob))
        contracts.setdefault(entry["group"], having[-1].doc["groups"][entry["group"]]["contract"])
    return entries, blobs, contracts


def write_multi(part_dirs: list[Path], out_dir: Path, ptx_checks: Path | None = None) -> MultiReport:
    """Merge per-arch build directories of one platform and profile into out_dir (a staging directory);
    `ptx_checks` keeps the verdicts of the PTX portability checks (compiler.portable_ptx)."""
    if not part_dirs:
        raise PipelineError("no per-arch build to merge")
    parts = sorted((_read_part(Path(d)) for d in part_dirs), key=lambda p: arch_key(p.arch))
    for what, get in (("platform", lambda d: d["target"]["platform"]), ("profile", lambda d: d.get("profile")),
                      ("triton version", lambda d: d["triton_version"]), ("host", lambda d: d["host"])):
        _same(parts, what, get)
    archs = [p.arch for p in parts]
    if len(set(archs)) != len(archs):
        raise PipelineError(f"two builds of one arch to merge: {', '.join(str(p.path) for p in parts)}")
    backend, platform = parts[0].doc["target"]["backend"], parts[0].doc["target"]["platform"]
    host, newest = parts[0].doc["host"], parts[-1]
    common = [k["name"] for k in parts[0].doc["kernels"] if all(k["name"] in p.by_name for p in parts)]
    for p in parts[1:]:
        if [k["name"] for k in p.doc["kernels"] if k["name"] in common] != common:
            raise PipelineError(f"{p.path} lists its kernels in another order than {parts[0].path}: "
                                "the builds were made from different kernel scripts")
    report = MultiReport(platform, archs)
    names = list(dict.fromkeys(k["name"] for p in parts for k in p.doc["kernels"]))
    for name in names:
        if name not in common:
            have = [p for p in parts if name in p.by_name]
            report.left_out.append({"name": name, "group": have[0].by_name[name]["group"],
                                    "archs": [p.arch for p in have]})
    if not common:
        raise PipelineError(f"no kernel is built for every arch of {', '.join(archs)}: nothing to merge")

    kernels, blobs, contracts = [], [], {}
    portable = _portable(newest, common, ptx_checks) if backend == "cuda" else {}
    for index, name in enumerate(common):
        entry, blob = _merged(name, parts, index, backend, host, portable.get(name))
        kernels.append(entry)
        blobs.append((name, CONTAINER_EXT[backend], blob))
        group = entry["group"]
        if group not in contracts:
            _same(parts, f"the contract of group {group}", lambda d, g=group: d["groups"][g]["contract"])
            contracts[group] = newest.doc["groups"][group]["contract"]
    target = {"backend": backend, "arch": MULTI, "arch_name": MULTI, "platform": platform,
              "warp_size": kernels[0]["warp_size"], "archs": archs}
    paths = package(out_dir, blobs, kernels, host, lambda archive, header: manifest.build_manifest(
        target, parts[0].doc["triton_version"], kernels, contracts, archive=archive, header=header, host=host,
        profile=parts[0].doc.get("profile", "full"), left_out=report.left_out))
    report.kernels = len(kernels)
    report.archive_bytes = paths["archive"].stat().st_size
    report.paths = paths
    return report


def merge_builds(part_roots: list[Path], platform: str, archs: list[str], out_root: Path,
                 ptx_checks: Path | None = None) -> MultiReport:
    """`<out_root>/<platform>/multi/` from `<root>/<platform>/<arch>/` of each arch, found in one of
    part_roots (per-arch builds from other machines); arch builds found elsewhere are copied into
    out_root beside it. All or nothing: everything is staged, then renamed into place."""
    sources = {}
    for arch in archs:
        found = [Path(r) / platform / arch for r in part_roots
                 if (Path(r) / platform / arch / MANIFEST_NAME).is_file()]
        if not found:
            raise PipelineError(f"no {platform}/{arch} build in {', '.join(map(str, part_roots))} "
                                f"(expected <root>/{platform}/{arch}/{MANIFEST_NAME})")
        sources[arch] = found[0]
    out_root = Path(out_root)
    (out_root / platform).mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".merge-", dir=out_root / platform))
    try:
        report = write_multi(list(sources.values()), staging / MULTI, ptx_checks)
        moves = [(staging / MULTI, out_root / platform / MULTI)]
        for arch, src in sources.items():
            dest = out_root / platform / arch
            if src.resolve() != dest.resolve():
                shutil.copytree(src, staging / arch)
                moves.append((staging / arch, dest))
                record = src.parent / f"{arch}.image.json"
                if record.is_file():
                    shutil.copyfile(record, staging / f"{arch}.image.json")
                    moves.append((staging / f"{arch}.image.json", dest.parent / record.name))
        # The image that built every part built the merge too (what the docker runner records for one build).
        records = {(s.parent / f"{a}.image.json").read_text() if (s.parent / f"{a}.image.json").is_file() else None
                   for a, s in sources.items()}
        multi_record = out_root / platform / f"{MULTI}.image.json"
        if len(records) == 1 and None not in records:
            (staging / multi_record.name).write_text(records.pop())
            moves.append((staging / multi_record.name, multi_record))
        else:
            multi_record.unlink(missing_ok=True)
        for src, dest in moves:
            if src.is_dir():
                replace_dir(src, dest, staging / f".old-{dest.name}")
            else:
                os.replace(src, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report.paths = artifact_paths(out_root / platform / MULTI)
    report.archive_bytes = report.paths["archive"].stat().st_size
    return report
