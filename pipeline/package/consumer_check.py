"""CPU-side proof that ORT can consume an artifact set: build a provider-like shared library from the
header and archive with g++, resolve every kernel with dlsym, and compare each blob to kernels.json.
For a multi-arch build, the archs inside every blob (cuobjdump; clang-offload-bundler) must be the ones
kernels.json lists."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

from tritonforge.artifact_format import ARCHIVE_NAME, HEADER_NAME, MANIFEST_NAME, FormatError, read_kernels_json

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"
EXEC_STACK_WARNING = re.compile(r"executable stack|\.note\.GNU-stack", re.I)


@dataclass
class ConsumerResult:
    kernels: int
    link_output: str
    stack_flags: str
    program_output: str


def _run(argv, cwd, what):
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"{what} failed ({' '.join(map(str, argv))}):\n{proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def check_artifacts(artifact_dir: Path | str, workdir: Path | str | None = None) -> ConsumerResult:
    """Link and run the consumer against `<dir>/triton_kernel_infos.{a,h}` + kernels.json."""
    d = Path(artifact_dir).resolve()
    missing = [n for n in (MANIFEST_NAME, ARCHIVE_NAME, HEADER_NAME) if not (d / n).is_file()]
    if missing:
        raise PipelineError(f"{artifact_dir}: not an artifact directory (no {', '.join(missing)})")
    try:
        doc = read_kernels_json(d)
    except FormatError as exc:
        raise PipelineError(str(exc)) from None
    multi = doc["target"]["arch"] == "multi"
    if multi:
        kind = "fatbin" if doc["target"]["backend"] == "cuda" else "hipfb"
    else:
        kind = "190" if doc["target"]["backend"] == "cuda" else "224"  # the blobs' ELF machine
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise PipelineError("g++ not found: the consumer check needs a C++ compiler")
    with tempfile.TemporaryDirectory(prefix="tf-consumer-", dir=workdir) as tmp:
        w = Path(tmp)
        dump = w / "blobs"
        dump.mkdir()
        # -O0: g++ spends minutes optimising the header's thousands of static initializers (at -O1,
        # over nine CPU minutes per compile with 2900 kernels), and nothing checked here depends on it.
        link = _run([cxx, "-std=c++17", "-O0", "-fPIC", "-shared", "-o", "libprovider.so",
                     f"-I{d}", str(TEMPLATES / "ort_consumer.cc"),
                     "-Wl,--whole-archive", str(d / ARCHIVE_NAME), "-Wl,--no-whole-archive",
                     f"-Wl,--version-script={TEMPLATES / 'provider.lds'}", "-Wl,--warn-execstack", "-ldl"],
                    w, "linking the consumer library")
        link += _run([cxx, "-o", "consumer", str(TEMPLATES / "ort_consumer_main.cc"), "-L.", "-lprovider",
                      "-Wl,-rpath,$ORIGIN", "-Wl,--warn-execstack"], w, "linking the consumer program")
        if EXEC_STACK_WARNING.search(link):
            raise PipelineError(f"linking {d / ARCHIVE_NAME} warned about the stack:\n{link}")
        stack = _gnu_stack_flags(w / "libprovider.so")
        if "E" in stack:
            raise PipelineError(f"the consumer library got an executable stack ({stack})")
        out = _run([str(w / "consumer"), kind, str(dump)], w, "running the consumer")
        seen = _read_index(dump / "index.tsv")
        _compare(d, doc["kernels"], seen, dump)
        if multi:
            _compare_contents(d, doc["kernels"], dump, kind)
        return ConsumerResult(len(seen), link, stack, out)


def _read_index(path: Path) -> list[dict]:
    """The consumer's index.tsv: what the C++ side found for each header entry, in header order."""
    rows = []
    for line in path.read_text().splitlines():
        name, group, func, warps, shared, size, machine, constants = line.split("\t")
        rows.append({"name": name, "group": group, "func_name": func, "num_warps": int(warps),
                     "shared": int(shared), "size": int(size), "machine": int(machine),
                     "constants": dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in constants.split(",") if kv)})
    return rows


def _compare(d: Path, kernels: list[dict], seen: list[dict], dump: Path) -> None:
    """The header and archive, as the consumer saw them, must say what kernels.json says, in its order."""
    if [r["name"] for r in seen] != [k["name"] for k in kernels]:
        raise PipelineError(f"{d}: the header lists {len(seen)} kernels and kernels.json {len(kernels)}, or in "
                            "another order")
    mismatched = []
    for k, r in zip(kernels, seen):
        blob = dump / f"{k['name']}.bin"
        digest = hashlib.sha256(blob.read_bytes()).hexdigest() if blob.is_file() else None
        same = (digest == k["binary"]["sha256"] and r["size"] == k["binary"]["size"]
                and all(r[f] == k[f] for f in ("group", "func_name", "num_warps", "shared", "constants")))
        if not same:
            mismatched.append(k["name"])
    if mismatched:
        raise PipelineError(f"{d}: the archive or header differs from kernels.json for {mismatched[:5]}")


def _compare_contents(d: Path, kernels: list[dict], dump: Path, kind: str) -> None:
    """Every container holds exactly the code kernels.json lists for it (kind:arch, in any order)."""
    from concurrent.futures import ThreadPoolExecutor

    from tritonforge.pipeline.package.containers import list_bundle, list_fatbin

    lister = list_fatbin if kind == "fatbin" else list_bundle
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(lambda k: lister(dump / f"{k['name']}.bin", k["name"]), kernels))
    wrong = [f"{k['name']} holds {sorted(f)}, kernels.json lists {sorted(want)}" for k, f in zip(kernels, found)
             if sorted(f) != sorted(want := [f"{c['kind']}:{c['arch']}" for c in k["contents"]])]
    if wrong:
        raise PipelineError(f"{d}: blobs differ from kernels.json: " + "; ".join(wrong[:5]))


def _gnu_stack_flags(lib: Path) -> str:
    out = subprocess.run(["readelf", "-lW", str(lib)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "GNU_STACK" in line:
            return line.split()[-2]
    return "missing"
