"""The multi-arch archive on the GPU: every fatbin loads through the runtime, the driver takes the cubin
made for this GPU (the same code as the per-arch archive's), every kernel gives the right answer, and the
PTX inside, which a newer GPU would JIT-compile, is correct code too."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from .ops import test_group_norm, test_softmax

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def multi_registry(cuda, gpu_artifacts_dir):
    from tritonforge.runtime import load_artifacts
    from tritonforge.runtime.registry import Registry

    d = gpu_artifacts_dir.parent / "multi"
    if not (d / "kernels.json").is_file():
        pytest.fail(f"no multi-arch build at {d}: `invoke build` writes one beside the per-arch builds")
    return Registry(load_artifacts(d), cuda)


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def test_every_fatbin_loads_this_arch_cubin(multi_registry, registry, cuda):
    """Same registers, static shared memory and binary version as the per-arch archive's cubin, for every
    kernel; the fatbins hold a cubin for each merged arch and PTX for the newest."""
    arch = f"sm_{cuda.arch}"
    assert arch in multi_registry.artifacts.archs
    assert multi_registry.load_all() == len(multi_registry.artifacts.kernels)
    for info in multi_registry.artifacts.kernels:
        kinds = {(c["kind"], c["arch"].rstrip("a")) for c in info.raw["contents"]}
        assert ("cubin", arch) in kinds and any(k == "ptx" for k, _ in kinds), (info.name, kinds)
        got = multi_registry.kernel(info.name).attributes
        want = registry.kernel(info.name).attributes
        assert got == want, (info.name, got, want)
        assert got["binary_version"] == int(cuda.arch), info.name


def test_every_kernel_is_correct_from_the_multi_archive(multi_registry, rng):
    test_softmax.test_every_kernel_of_every_group_runs(multi_registry, rng)
    test_group_norm.test_every_kernel_runs(multi_registry, rng)


PTX_PROBE = """
import json, sys
import numpy as np
from tritonforge.runtime import load_artifacts
from tritonforge.runtime.cuda import CudaBackend
from tritonforge.runtime.registry import Registry
from tests.runtime.ops import test_softmax
reg = Registry(load_artifacts(sys.argv[1]), CudaBackend(0))
done = []
for name in json.loads(sys.argv[2]):
    info = reg.by_name[name]
    dtype, n = info.group.rsplit("_", 1)[1], info.constants.get("CHUNK", info.constants["BLOCK_SIZE"]) - 3
    x = np.random.default_rng(5).standard_normal((3, n)).astype(np.float32)
    test_softmax.run_and_check(reg, name, dtype, False, x, what="from PTX")
    done.append([name, reg.kernel(name).attributes["num_regs"]])
print(json.dumps(done))
"""


def test_the_ptx_inside_runs_correctly(multi_registry, root):
    """With CUDA_FORCE_PTX_JIT the driver ignores the cubins and compiles the PTX, as a GPU newer than
    every cubin would: one kernel of each softmax group of ORT's, run and checked."""
    names = [infos[0].name for g, infos in multi_registry.by_group.items() if g.startswith("softmax_fp")]
    assert names
    env = dict(os.environ, CUDA_FORCE_PTX_JIT="1", PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-c", PTX_PROBE, str(multi_registry.artifacts.path), json.dumps(names)],
                          capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [n for n, _ in ran] == names
