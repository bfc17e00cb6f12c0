"""An artifact directory (archive + kernels.json), verified: every blob is found by the symbol the
header names and must hash to what kernels.json records."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from tritonforge.artifact_format import MANIFEST_NAME as MANIFEST
from tritonforge.artifact_format import FormatError, read_kernels_json
from tritonforge.errors import TritonforgeError

from .archive import ArchiveFormatError, read_archive_symbols


class ArtifactError(TritonforgeError, RuntimeError):
    """The artifacts are missing, malformed or do not match their manifest."""


@dataclass(frozen=True)
class KernelInfo:
    index: int
    name: str
    group: str
    func_name: str
    symbol: str
    warp_size: int
    num_warps: int
    shared: int
    constants: dict
    params: tuple  # dicts: name, type, divisibility, offset, size
    hidden_params: tuple  # dicts: name, offset, size, scratch_size, scratch_align
    args_size: int
    sha256: str
    raw: dict = field(repr=False, compare=False, default_factory=dict)

    @property
    def threads_per_block(self) -> int:
        return self.warp_size * self.num_warps

    @classmethod
    def from_manifest(cls, k: dict) -> KernelInfo:
        return cls(k["index"], k["name"], k["group"], k["func_name"], k["symbol"], k["warp_size"],
                   k["num_warps"], k["shared"], dict(k["constants"]), tuple(k["params"]),
                   tuple(k["hidden_params"]), k["args_size"], k["binary"]["sha256"], k)


@dataclass
class Artifacts:
    path: Path
    manifest: dict
    kernels: list[KernelInfo]
    blobs: dict[str, bytes]  # kernel name -> binary

    @property
    def backend(self) -> str:
        return self.manifest["target"]["backend"]

    @property
    def arch(self) -> str:
        return self.manifest["target"]["arch"]

    @property
    def archs(self) -> list[str]:
        """The arch names inside: [sm_90] for a per-arch build, every merged arch for a multi build."""
        return self.manifest["target"].get("archs", [self.manifest["target"]["arch_name"]])

    def runs_on(self, arch: str) -> bool:
        """Whether a CUDA device of compute capability `arch` ("90") can load every blob: a cubin it runs
        (made for it, or before sm_90 for an older minor of its major: sm_80 code runs on sm_86), or, in a
        multi build, PTX of an arch no newer than it, which the driver JIT-compiles."""
        dev = int(arch)
        for name in self.archs:
            cc = int(name.removeprefix("sm_"))
            if cc == dev or (cc < 90 and cc // 10 == dev // 10 and cc <= dev):
                return True
        oldest = [min((int(c["arch"][3:]) for c in k.raw.get("contents", []) if c["kind"] == "ptx"), default=None)
                  for k in self.kernels]
        return bool(oldest) and all(a is not None and a <= dev for a in oldest)

    def contract(self, group: str) -> dict | None:
        return self.manifest["groups"][group]["contract"]

    def groups(self) -> dict[str, list[KernelInfo]]:
        out: dict[str, list[KernelInfo]] = {}
        for k in self.kernels:
            out.setdefault(k.group, []).append(k)
        return out


def load_artifacts(path: Path | str) -> Artifacts:
    """Load `<path>/kernels.json` and the archive beside it; verify archive and every blob hash."""
    d = Path(path)
    if d.is_file():
        d = d.parent
    try:
        manifest = read_kernels_json(d / MANIFEST)
    except FileNotFoundError:
        raise ArtifactError(f"{d / MANIFEST}: not found") from None
    except FormatError as exc:
        raise ArtifactError(str(exc)) from None
    archive = d / manifest["archive"]["file"]
    try:
        data = archive.read_bytes()
    except FileNotFoundError:
        raise ArtifactError(f"{archive}: not found") from None
    want = manifest["archive"]["sha256"]
    if hashlib.sha256(data).hexdigest() != want:
        raise ArtifactError(f"{archive}: sha256 differs from {MANIFEST} ({want})")
    try:
        symbols = read_archive_symbols(archive)
    except ArchiveFormatError as exc:
        raise ArtifactError(str(exc)) from None
    kernels = [KernelInfo.from_manifest(k) for k in manifest["kernels"]]
    blobs = {}
    for k in kernels:
        blob = symbols.get(k.symbol)
        if blob is None:
            raise ArtifactError(f"{archive}: no symbol {k.symbol} for kernel {k.name}")
        if hashlib.sha256(blob).hexdigest() != k.sha256:
            raise ArtifactError(f"{archive}: kernel {k.name}: blob sha256 differs from {MANIFEST}")
        blobs[k.name] = blob
    return Artifacts(d, manifest, kernels, blobs)
