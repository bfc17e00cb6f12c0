"""The C++ toolchain the custom-op library is built with: Zig's clang (`python -m ziglang c++`, the `ziglang`
wheel) aimed at the build's host (x86_64 or aarch64) with glibc GLIBC and its own libc++ linked in, so the
library needs nothing of the build
machine's C and C++ runtimes newer than the oldest Linux the wheel claims (manylinux_2_17: RHEL 7 and
everything since, a superset of where onnxruntime-gpu installs). The host's g++ would link the host's
glibc symbol versions (glibc 2.34+ moves dlopen, 2.35-2.36 add what static libstdc++ and libgcc pull in).

Zig builds libc++ for the target once per machine, into its global cache (~/.cache/zig, a minute on two
cores): `warm()` starts that in the background at the beginning of a CUDA build, which needs the library
only at its end.
"""

from __future__ import annotations

import functools
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError

GLIBC = "2.17"
HOSTS = ("x86_64", "aarch64")


def target(host: str = "x86_64") -> str:
    if host not in HOSTS:
        raise PipelineError(f"no ORT library toolchain for host '{host}' (known: {', '.join(HOSTS)})")
    return f"{host}-linux-gnu.{GLIBC}"


def compiler(host: str = "x86_64") -> list[str]:
    """The command that compiles and links C++ for `host` and glibc GLIBC, or a PipelineError naming the fix."""
    try:
        import ziglang  # noqa: F401
    except ImportError:
        raise PipelineError("the ORT library is built with Zig's C++ compiler aimed at glibc "
                            f"{GLIBC}: pip install ziglang (pins/requirements.txt)") from None
    return [sys.executable, "-m", "ziglang", "c++", "-target", target(host)]


@functools.cache
def version(host: str = "x86_64") -> str:
    """What identifies the toolchain for caches: Zig's version and the target."""
    proc = subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True, text=True)
    return f"zig {proc.stdout.strip()} {target(host)}"


_warming: threading.Thread | None = None


def warm(host: str = "x86_64") -> None:
    """Build the target's C++ runtime into Zig's cache in the background (a tiny library that throws and
    formats, as the real one does); errors show when the real link runs."""
    global _warming
    if _warming is not None:
        return
    try:
        cmd = compiler(host)
    except PipelineError:
        return

    def run():
        try:
            with tempfile.TemporaryDirectory(prefix="tf-zig-warm-") as tmp:
                src = Path(tmp) / "warm.cc"
                src.write_text('#include <sstream>\n#include <stdexcept>\nextern "C" int tf_warm(int v) { '
                               "std::ostringstream o; o << v; try { throw std::runtime_error(o.str()); } "
                               "catch (const std::exception& e) { return (int)e.what()[0]; } }\n")
                subprocess.run([*cmd, "-shared", "-fPIC", "-O2", str(src), "-o", str(Path(tmp) / "warm.so")],
                               capture_output=True)
        except Exception:  # noqa: BLE001 - best effort: a command that ends early (a bad argument) may cut it short
            pass

    _warming = threading.Thread(target=run, name="zig-warm", daemon=True)
    _warming.start()
