"""A C++ program loads and launches the archive exactly as ORT does, on the GPU: every entry loaded, the
candidates of ORT's softmax and GroupNorm groups picked by ORT's rules and launched with ORT's own 32- and
80-byte argument structs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent


def cuda_home() -> Path:
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if cand and (Path(cand) / "include" / "cuda.h").is_file():
            return Path(cand)
    nvcc = shutil.which("nvcc")
    if nvcc and (Path(nvcc).resolve().parent.parent / "include" / "cuda.h").is_file():
        return Path(nvcc).resolve().parent.parent
    pytest.fail("cuda.h not found (set CUDA_HOME)")


@pytest.mark.parametrize("build", ["arch", "multi"])
def test_ort_style_cpp_consumer(cuda, gpu_artifacts_dir, root, tmp_path, build):
    """The archive of this GPU's arch, and the multi-arch one (fatbins) with PTX JIT disabled in the driver:
    every blob loads from the cubin made for this arch, never from the PTX."""
    cxx = shutil.which("g++") or pytest.fail("g++ not found")
    env = dict(os.environ)
    if build == "multi":
        gpu_artifacts_dir = gpu_artifacts_dir.parent / "multi"
        env["CUDA_DISABLE_PTX_JIT"] = "1"  # a blob without a cubin for this GPU then fails to load
    home = cuda_home()
    candidates = (home / "lib64", home / "lib64" / "stubs", home / "targets/x86_64-linux/lib/stubs")
    libdirs = [p for p in candidates if p.is_dir()]
    ldflags = [f"-L{p}" for p in libdirs]
    subprocess.run([cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-o", "libprovider.so", f"-I{home / 'include'}",
                    f"-I{gpu_artifacts_dir}", str(HERE / "ort_gpu_consumer.cc"), "-Wl,--whole-archive",
                    str(gpu_artifacts_dir / "triton_kernel_infos.a"), "-Wl,--no-whole-archive",
                    f"-Wl,--version-script={root / 'pipeline/templates/provider.lds'}", *ldflags, "-lcuda", "-ldl"],
                   cwd=tmp_path, check=True)
    (tmp_path / "main.cc").write_text(
        '#include <cstdlib>\n#include <cstring>\nextern "C" int tf_run_softmax(int, int);\n'
        'extern "C" int tf_run_group_norm(int, int, int, int, int);\n'
        "int main(int c, char** v) {\n"
        '  if (std::strcmp(v[1], "softmax") == 0) return tf_run_softmax(std::atoi(v[2]), std::atoi(v[3]));\n'
        "  return tf_run_group_norm(std::atoi(v[2]), std::atoi(v[3]), std::atoi(v[4]), std::atoi(v[5]),\n"
        "                           std::atoi(v[6]));\n}\n")
    subprocess.run([cxx, "-o", "consumer", "main.cc", "-L.", "-lprovider", "-Wl,-rpath,$ORIGIN"], cwd=tmp_path,
                   check=True)
    runs = [("softmax", 7, 1000), ("softmax", 3, 3000), ("softmax", 2, 16384), ("softmax", 5, 17),
            ("group_norm", 2, 64, 320, 32, 1), ("group_norm", 1, 256, 640, 32, 0), ("group_norm", 2, 48, 64, 8, 1)]
    for args in runs:
        proc = subprocess.run([str(tmp_path / "consumer"), *map(str, args)], capture_output=True, text=True,
                              timeout=120, env=env)
        print(proc.stdout)
        assert proc.returncode == 0, (args, proc.stdout + proc.stderr)
        assert "0 failures" in proc.stdout and "launched 0 " not in proc.stdout, args
