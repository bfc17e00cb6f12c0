"""The compile cache: keys that depend on the inputs alone, and a corrupt entry compiled again, never shipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tritonforge.pipeline.builds.dist import build_dist
from tritonforge.pipeline.compile.targets import parse_targets

from ..builds.test_dist import read

KEYS = """
import json, sys
from tritonforge.pipeline.builds.dist import discover_scripts, kernel_key
from tritonforge.pipeline.scripts.table import load_table
from tritonforge.pipeline.compile.targets import parse_target

target = parse_target("sm_90")
scripts = discover_scripts(sys.argv[1])
print(json.dumps([[kernel_key(k, target, "3.5.0") for k in load_table(scripts).kernels] for _ in range(2)]))
"""


def test_compile_keys_are_a_pure_function_of_the_inputs(root, small_kernels, tmp_path):
    """The first load of the scripts in a process, every later load, another process and another directory
    give each kernel the same compile-cache key (Triton's own JIT key depends on the load order)."""
    import shutil

    def keys(kernels):
        proc = subprocess.run([sys.executable, "-c", KEYS, str(kernels)], cwd=root, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    first, later = keys(small_kernels)
    assert first == later
    assert keys(shutil.copytree(small_kernels, tmp_path / "elsewhere")) == [first, first]
    assert len(set(first)) == len(first)  # one key per kernel
    # A change to a helper that a script imports changes that script's keys, and only those.
    moved = tmp_path / "changed"
    shutil.copytree(small_kernels, moved)
    (moved / "_packed16.py").write_text((moved / "_packed16.py").read_text() + "\n# changed\n")
    changed, _ = keys(moved)
    from tritonforge.pipeline.builds.dist import discover_scripts
    from tritonforge.pipeline.scripts.table import load_table

    table = load_table(discover_scripts(small_kernels))
    differ = {Path(k.script).name for k, a, b in zip(table.kernels, first, changed) if a != b}
    assert differ == {"softmax_packed_triton.py", "softmax_cluster_triton.py"}


def test_corrupt_cache_entry_is_recompiled_not_shipped(tmp_path, root):
    from ..scripts.bad_scripts import GOOD, table

    script = tmp_path / "k.py"
    script.write_text(table(GOOD))
    cache = tmp_path / "cache"
    first = build_dist([script], parse_targets("sm_90"), tmp_path / "a", cache_dir=cache, jobs=1)
    assert first.compiled == 1
    (entry,) = cache.rglob("*.bin")
    entry.write_bytes(b"garbage")
    again = build_dist([script], parse_targets("sm_90"), tmp_path / "b", cache_dir=cache, jobs=1)
    assert again.compiled == 1 and again.cached == 0
    archive = "cuda/sm_90/triton_kernel_infos.a"
    assert read(tmp_path / "a" / archive) == read(tmp_path / "b" / archive)
