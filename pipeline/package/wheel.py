"""The custom-op library as the wheel onnxruntime-gpu users install: `tritonforge_ort`.

    pip install tritonforge_ort-0.1.0-py3-none-manylinux_2_36_x86_64.whl
    tritonforge-rewrite vae_decoder.onnx        # -> vae_decoder.tf.onnx
    python -c "import onnxruntime as ort, tritonforge_ort; so = ort.SessionOptions(); tritonforge_ort.register(so)"

Its package is runtime/ortlib/ as it is in the repository (the face: `get_library_path()`, `register()`,
`info()`, `choices()`; the rewrite, `tritonforge_ort.rewrite.rewrite_file`; the command line), which
imports nothing of the rest of the project, with the library of a CUDA build (the `multi` one of the
full profile: every GPU of the build) and its tune file beside it. Its one dependency is onnx, for the
rewrite; onnxruntime-gpu is the user's (extra `gpu`).

The platform tag is the one the library meets: manylinux_2_<N>, N the newest GLIBC symbol version it
needs. The audit refuses a library that needs anything but the system C/C++ runtime and the dynamic
loader (the CUDA driver, libcuda.so.1, is opened at run time, not linked).
"""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import zipfile
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

from tritonforge import artifact_format
from tritonforge.atomic import staged

NAME = "tritonforge_ort"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / "runtime" / "ortlib"
# What a manylinux library may need (PEP 600's system libraries): the C and C++ runtimes and the loader.
ALLOWED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libgcc_s.so.1",
           "libstdc++.so.6", "ld-linux-x86-64.so.2"}
REQUIRES = ["onnx>=1.16"]  # the rewrite reads and writes models (numpy comes with it)
EXTRAS = {"gpu": ["onnxruntime-gpu"]}


def wheel_version(version: str) -> str:
    """A release version as a wheel's (a tag's `v1.4.0` is 1.4.0); refuses what pip would not read."""
    v = version[1:] if re.match(r"v\d", version) else version
    if not re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?", v):
        raise PipelineError(f"version '{version}' is not a version pip reads (like 1.4.0, 1.4.0rc1)")
    return v


def audit(lib: Path) -> tuple[str, list[str]]:
    """(the manylinux platform tag the library meets, its NEEDED libraries); refuses anything else."""
    dyn = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True)
    if dyn.returncode:
        raise PipelineError(f"{lib}: readelf cannot read it: {dyn.stderr.strip()}")
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn.stdout)
    extra = sorted(set(needed) - ALLOWED)
    if extra:
        raise PipelineError(f"{lib}: needs {', '.join(extra)}, which no manylinux system provides "
                            f"(allowed: the C/C++ runtime and the loader)")
    syms = subprocess.run(["objdump", "-T", str(lib)], capture_output=True, text=True, check=True).stdout
    glibc = max([int(m) for m in re.findall(r"GLIBC_2\.(\d+)", syms)] + [17])
    return f"manylinux_2_{glibc}_x86_64", needed


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def _metadata(version: str) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version}",
             "Summary: Triton-compiled GroupNorm and softmax kernels for onnxruntime-gpu, as a custom-op library",
             "Requires-Python: >=3.10", *[f"Requires-Dist: {r}" for r in REQUIRES]]
    for extra, reqs in EXTRAS.items():
        lines += [f"Provides-Extra: {extra}", *[f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]]
    return "\n".join(lines) + "\n"


def package_files() -> dict[str, bytes]:
    """The Python files of the package, as the repository holds them (no C++ sources, no caches)."""
    files = {}
    for p in sorted(PACKAGE_DIR.rglob("*.py")):
        if "__pycache__" not in p.parts:
            files[f"{NAME}/{p.relative_to(PACKAGE_DIR).as_posix()}"] = p.read_bytes()
    return files


def build_wheel(lib: Path | str, out_dir: Path | str, version: str) -> Path:
    """Write `<out_dir>/tritonforge_ort-<version>-py3-none-<tag>.whl` around library `lib` (and the tune
    file beside it, when there is one); returns its path. Refuses to overwrite a different wheel."""
    lib = Path(lib)
    if not lib.is_file():
        raise PipelineError(f"{lib}: no library to put in the wheel (invoke build --platform cuda --profile full)")
    version = wheel_version(version)
    tag, _ = audit(lib)
    files = package_files()
    files[f"{NAME}/{artifact_format.LIBRARY_NAME}"] = lib.read_bytes()
    tune = lib.with_name(artifact_format.LIBRARY_TUNE_NAME)
    if tune.is_file():
        files[f"{NAME}/{tune.name}"] = tune.read_bytes()
    info = f"{NAME}-{version}.dist-info"
    files[f"{info}/METADATA"] = _metadata(version).encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: tritonforge\nRoot-Is-Purelib: false\n"
                              f"Tag: py3-none-{tag}\n").encode()
    files[f"{info}/entry_points.txt"] = f"[console_scripts]\ntritonforge-rewrite = {NAME}.cli:main\n".encode()
    files[f"{info}/top_level.txt"] = f"{NAME}\n".encode()
    record = [_record_line(path, data) for path, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out = Path(out_dir) / f"{NAME}-{version}-py3-none-{tag}.whl"
    with staged(out) as (tmp,):
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
            for path, data in files.items():
                zi = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))  # the same inputs, the same bytes
                zi.compress_type = zipfile.ZIP_DEFLATED
                zi.external_attr = 0o644 << 16
                z.writestr(zi, data)
        if out.exists() and out.read_bytes() != tmp.read_bytes():
            raise PipelineError(f"{out} exists with other contents: a version's wheel is never replaced "
                                "(give another --version)")
    return out
