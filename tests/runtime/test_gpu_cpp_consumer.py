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
# The consumer's driver: one case per line of stdin, all in one process (every blob loaded once):
#   softmax DTYPE BATCH N_COLS IN_STRIDE OUT_STRIDE  |  group_norm N HW C GROUPS SILU
MAIN = r"""#include <iostream>
#include <string>
extern "C" int tf_run_softmax(const char*, int, int, int, int);
extern "C" int tf_run_group_norm(int, int, int, int, int);
int main() {
  std::string op;
  int failures = 0;
  while (std::cin >> op) {
    if (op == "softmax") {
      std::string dt;
      int b, n, si, so;
      std::cin >> dt >> b >> n >> si >> so;
      failures += tf_run_softmax(dt.c_str(), b, n, si, so) != 0;
    } else {
      int n, hw, c, g, silu;
      std::cin >> n >> hw >> c >> g >> silu;
      failures += tf_run_group_norm(n, hw, c, g, silu) != 0;
    }
  }
  return failures == 0 ? 0 : 1;
}
"""


def cuda_home() -> Path:
    for cand in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if cand and (Path(cand) / "include" / "cuda.h").is_file():
            return Path(cand)
    nvcc = shutil.which("nvcc")
    if nvcc and (Path(nvcc).resolve().parent.parent / "include" / "cuda.h").is_file():
        return Path(nvcc).resolve().parent.parent
    pytest.fail("cuda.h not found (set CUDA_HOME)")


def build_consumer(gpu_dir: Path, root: Path, tmp_path: Path) -> Path:
    """The provider library (the archive under --whole-archive, the header included as ORT does) and the
    driver program linked against it."""
    cxx = shutil.which("g++") or pytest.fail("g++ not found")
    home = cuda_home()
    candidates = (home / "lib64", home / "lib64" / "stubs", home / "targets/x86_64-linux/lib/stubs")
    ldflags = [f"-L{p}" for p in candidates if p.is_dir()]
    subprocess.run([cxx, "-std=c++17", "-O2", "-fPIC", "-shared", "-o", "libprovider.so", f"-I{home / 'include'}",
                    f"-I{gpu_dir}", str(HERE / "ort_gpu_consumer.cc"), "-Wl,--whole-archive",
                    str(gpu_dir / "triton_kernel_infos.a"), "-Wl,--no-whole-archive",
                    f"-Wl,--version-script={root / 'pipeline/templates/provider.lds'}", *ldflags, "-lcuda", "-ldl"],
                   cwd=tmp_path, check=True)
    (tmp_path / "main.cc").write_text(MAIN)
    subprocess.run([cxx, "-o", "consumer", "main.cc", "-L.", "-lprovider", "-Wl,-rpath,$ORIGIN"], cwd=tmp_path,
                   check=True)
    return tmp_path / "consumer"


def run_cases(consumer: Path, cases: list[tuple], env: dict | None = None) -> str:
    proc = subprocess.run([str(consumer)], input="".join(" ".join(map(str, c)) + "\n" for c in cases),
                          capture_output=True, text=True, timeout=600, env=env)
    fails = [line for line in proc.stdout.splitlines() if line.startswith("FAIL")]
    assert proc.returncode == 0 and not fails, "\n".join(fails[:20]) or proc.stdout[-3000:] + proc.stderr
    assert "launched 0 " not in proc.stdout
    return proc.stdout


@pytest.mark.parametrize("build", ["arch", "multi"])
def test_ort_style_cpp_consumer(cuda, gpu_artifacts_dir, root, tmp_path, build):
    """The archive of this GPU's arch, and the multi-arch one (fatbins) with PTX JIT disabled in the driver:
    every blob loads from the cubin made for this arch, never from the PTX."""
    env = dict(os.environ)
    if build == "multi":
        gpu_artifacts_dir = gpu_artifacts_dir.parent / "multi"
        env["CUDA_DISABLE_PTX_JIT"] = "1"  # a blob without a cubin for this GPU then fails to load
    consumer = build_consumer(gpu_artifacts_dir, root, tmp_path)
    out = run_cases(consumer, [
        ("softmax", "fp32", 7, 1000, 1000, 1000), ("softmax", "fp16", 3, 3000, 3000, 3000),
        ("softmax", "bf16", 2, 16384, 16384, 16384), ("softmax", "fp64", 5, 17, 17, 17),
        ("group_norm", 2, 64, 320, 32, 1), ("group_norm", 1, 256, 640, 32, 0), ("group_norm", 2, 48, 64, 8, 1)], env)
    print(out)


def test_every_candidate_of_orts_softmax_groups_on_awkward_rows(cuda, gpu_artifacts_dir, root, tmp_path):
    """kernel_explorer's way, through ORT's exact launch: every candidate ORT's rule picks, in every dtype,
    for rows of 1, 17, 1000 and 4095 columns and of every block size, with strides equal to the row, odd,
    and 16-element padded; rows of -inf give NaN; the output is poisoned first, padding checked untouched."""
    consumer = build_consumer(gpu_artifacts_dir, root, tmp_path)
    blocks = [32 << i for i in range(12)]  # 32 .. 65536 (the packed 16-bit kernels)
    cases = []
    for dt in ("fp32", "fp16", "bf16", "fp64"):
        for n in sorted({1, 17, 1000, 4095, *blocks}):
            if n > 16384 and dt in ("fp32", "fp64"):
                continue
            for batch in ((1, 3, 33) if n <= 4096 else (1, 3)):
                for in_stride, out_stride in ((n, n), (n + 13, n + 5), (n + 16, n + 24)):
                    cases.append(("softmax", dt, batch, n, in_stride, out_stride))
    out = run_cases(consumer, cases)
    assert out.count("launched ") == len(cases)
