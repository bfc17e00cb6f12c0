"""The custom-op library as the wheel onnxruntime-gpu users install: `tritonforge_ort`.

    pip install tritonforge_ort-0.1.0-py3-none-manylinux_2_17_x86_64.whl
    tritonforge-rewrite vae_decoder.onnx        # -> vae_decoder.tf.onnx
    python -c "import onnxruntime as ort, tritonforge_ort; so = ort.SessionOptions(); tritonforge_ort.register(so)"

Its package is runtime/ortlib/ as it is in the repository (the face: `get_library_path()`, `register()`,
`info()`, `choices()`; the rewrite, `tritonforge_ort.rewrite.rewrite_file`; the command line), which
imports nothing of the rest of the project, with the library of a CUDA build (the `multi` one of the
full profile: every GPU of the build) and its tune file beside it. Its one dependency is onnx, for the
rewrite; onnxruntime-gpu is the user's (extra `gpu`). It runs on Python 3.9 and later.

The platform tag is what the ecosystem's own checker, auditwheel (`auditwheel show`), says the wheel
meets, and it must be one where onnxruntime-gpu installs (manylinux_2_28 or older): the library is built
for glibc 2.17 with its own libc++ (toolchain.py). The wheel is made under `linux_x86_64` first, audited,
then written under auditwheel's tag and audited again: the tag it ships with is one auditwheel agrees with.
"""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

from tritonforge import artifact_format
from tritonforge.atomic import write_bytes

NAME = "tritonforge_ort"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "runtime" / "ortlib"
REQUIRES = ["onnx>=1.16"]  # the rewrite reads and writes models (numpy comes with it)
OLDEST_ONNXRUNTIME = "1.18.0"  # the library's oldest C API (runtime/ortlib/src/ops.cc: kOldestApi), as README says
# gpu: onnxruntime-gpu; optimum: what runs a rewritten pipeline folder (tritonforge_ort.pipeline_sessions)
EXTRAS = {"gpu": [f"onnxruntime-gpu>={OLDEST_ONNXRUNTIME}"], "optimum": ["optimum-onnx>=0.1.0"]}
REQUIRES_PYTHON = ">=3.9"
NEWEST_GLIBC = 28  # onnxruntime-gpu's wheels are manylinux_2_28: a wheel that needs more installs nowhere it does


def wheel_version(version: str) -> str:
    """A release version as a wheel's (a tag's `v1.4.0` is 1.4.0); refuses what pip would not read."""
    v = version[1:] if re.match(r"v\d", version) else version
    if not re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?", v):
        raise PipelineError(f"version '{version}' is not a version pip reads (like 1.4.0, 1.4.0rc1)")
    return v


def auditwheel_show(whl: Path) -> str:
    """The platform tag `auditwheel show` says the wheel is consistent with (its most compatible one)."""
    proc = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(whl)], capture_output=True, text=True)
    said = " ".join(proc.stdout.split())
    m = re.search(r'is consistent with the following platform tag: "([^"]+)"', said)
    if proc.returncode or not m:
        if "No module named auditwheel" in proc.stderr:
            raise PipelineError("auditwheel is not installed (pip install auditwheel: pins/requirements.txt)")
        why = " ".join((proc.stderr.strip() or said).splitlines()[-3:])
        raise PipelineError(f"{whl.name}: auditwheel show refuses it: {why}")
    return m.group(1)


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _metadata(version: str) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version}",
             "Summary: Triton-compiled GroupNorm and softmax kernels for onnxruntime-gpu, as a custom-op library",
             f"Requires-Python: {REQUIRES_PYTHON}", *[f"Requires-Dist: {r}" for r in REQUIRES]]
    for extra, reqs in EXTRAS.items():
        lines += [f"Provides-Extra: {extra}", *[f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]]
    return "\n".join(lines) + "\n"


def package_files() -> dict[str, bytes]:
    """The Python files of the package and the data they read (the rewrite's choices.json), as the repository holds
    them (no C++ sources, no caches)."""
    files = {}
    for p in sorted([*PACKAGE_DIR.rglob("*.py"), *PACKAGE_DIR.rglob("*.json")]):
        if "__pycache__" not in p.parts:
            files[f"{NAME}/{p.relative_to(PACKAGE_DIR).as_posix()}"] = p.read_bytes()
    return files


def build_wheel(lib: Path | str, out_dir: Path | str, version: str) -> Path:
    """Write `<out_dir>/tritonforge_ort-<version>-py3-none-<tag>.whl` around library `lib` (and the tune
    file beside it, when there is one), `<tag>` what auditwheel says the wheel meets; returns its path.
    Refuses a library auditwheel places where onnxruntime-gpu does not install, and to overwrite a
    different wheel."""
    lib = Path(lib)
    if not lib.is_file():
        raise PipelineError(f"{lib}: no library to put in the wheel (invoke build --platform cuda --profile full)")
    version = wheel_version(version)
    files = package_files()
    files[f"{NAME}/{artifact_format.LIBRARY_NAME}"] = lib.read_bytes()
    tune = lib.with_name(artifact_format.LIBRARY_TUNE_NAME)
    if tune.is_file():
        files[f"{NAME}/{tune.name}"] = tune.read_bytes()
    out_dir = Path(out_dir)
    machine = _machine(lib)
    with tempfile.TemporaryDirectory(prefix="tf-wheel-") as tmp:
        tag = auditwheel_show(_write(Path(tmp) / f"{NAME}-{version}-py3-none-linux_{machine}.whl", files, version,
                                     f"linux_{machine}"))
        m = re.fullmatch(rf"manylinux_2_(\d+)_{machine}", tag)
        if not m or int(m.group(1)) > NEWEST_GLIBC:
            raise PipelineError(f"{lib}: auditwheel places it at {tag}; onnxruntime-gpu installs on manylinux_2_"
                                f"{NEWEST_GLIBC} and older, so pip would refuse this wheel where users are (build "
                                "the library with the project's toolchain: invoke build or invoke ortlib)")
        made = _write(Path(tmp) / f"{NAME}-{version}-py3-none-{tag}.whl", files, version, tag)
        said = auditwheel_show(made)
        if said != tag:
            raise PipelineError(f"{made.name}: auditwheel show says {said}, not the tag it is written with")
        out = out_dir / made.name
        if out.exists() and out.read_bytes() != made.read_bytes():
            raise PipelineError(f"{out} exists with other contents: a version's wheel is never replaced "
                                "(give another --version)")
        write_bytes(out, made.read_bytes())
    return out


def _machine(lib: Path) -> str:
    """The library's machine as wheel tags spell it, from its ELF header."""
    head = lib.read_bytes()[:20]
    if head[:4] != b"\x7fELF":
        raise PipelineError(f"{lib}: not an ELF shared library")
    machine = {62: "x86_64", 183: "aarch64"}.get(int.from_bytes(head[18:20], "little"))
    if machine is None:
        raise PipelineError(f"{lib}: a library for neither x86_64 nor aarch64")
    return machine


def _write(path: Path, files: dict[str, bytes], version: str, tag: str) -> Path:
    """The wheel of `files` with its dist-info, tagged py3-none-<tag>, at `path` (byte-identical for the
    same inputs)."""
    files = dict(files)
    info = f"{NAME}-{version}.dist-info"
    files[f"{info}/METADATA"] = _metadata(version).encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: tritonforge\nRoot-Is-Purelib: false\n"
                              f"Tag: py3-none-{tag}\n").encode()
    files[f"{info}/entry_points.txt"] = f"[console_scripts]\ntritonforge-rewrite = {NAME}.cli:main\n".encode()
    files[f"{info}/top_level.txt"] = f"{NAME}\n".encode()
    record = [_record_line(p, data) for p, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # the same inputs, the same bytes
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data)
    return path
