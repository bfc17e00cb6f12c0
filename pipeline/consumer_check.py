"""CPU-side proof that ORT can consume an artifact set: build a provider-like shared library from the
header and archive with g++, resolve every kernel with dlsym, and compare each blob to kernels.json."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import PipelineError

TEMPLATES = Path(__file__).resolve().parent / "templates"
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
    doc = json.loads((d / "kernels.json").read_text())
    machine = 190 if doc["target"]["backend"] == "cuda" else 224
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
                     "-Wl,--whole-archive", str(d / "triton_kernel_infos.a"), "-Wl,--no-whole-archive",
                     f"-Wl,--version-script={TEMPLATES / 'provider.lds'}", "-Wl,--warn-execstack", "-ldl"],
                    w, "linking the consumer library")
        link += _run([cxx, "-o", "consumer", str(TEMPLATES / "ort_consumer_main.cc"), "-L.", "-lprovider",
                      "-Wl,-rpath,$ORIGIN", "-Wl,--warn-execstack"], w, "linking the consumer program")
        if EXEC_STACK_WARNING.search(link):
            raise PipelineError(f"linking {d / 'triton_kernel_infos.a'} warned about the stack:\n{link}")
        stack = _gnu_stack_flags(w / "libprovider.so")
        if "E" in stack:
            raise PipelineError(f"the consumer library got an executable stack ({stack})")
        out = _run([str(w / "consumer"), str(machine), str(dump)], w, "running the consumer")
        mismatched = []
        for k in doc["kernels"]:
            blob = dump / f"{k['name']}.bin"
            if not blob.is_file() or hashlib.sha256(blob.read_bytes()).hexdigest() != k["binary"]["sha256"]:
                mismatched.append(k["name"])
        if mismatched:
            raise PipelineError(f"{d}: blobs differ from kernels.json for {mismatched[:5]}")
        return ConsumerResult(len(doc["kernels"]), link, stack, out)


def _gnu_stack_flags(lib: Path) -> str:
    out = subprocess.run(["readelf", "-lW", str(lib)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "GNU_STACK" in line:
            return line.split()[-2]
    return "missing"
