"""A real build of kernels/: outputs, manifest, determinism, cache, and the ORT drop-in CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tritonforge.pipeline.builds.dist import build_dist
from tritonforge.pipeline.compile.targets import parse_targets

from ...conftest import TEST_TARGETS


def read(path):
    return path.read_bytes()


def test_layout_and_counts(built):
    report, out, _ = built
    for t in report.targets:
        d = out / t.target.platform / t.target.arch_name
        ptx = ["ptx"] if t.target.platform == "cuda" else []  # the PTX a multi-arch merge takes
        assert sorted(p.name for p in d.iterdir()) == ["kernels.json", *ptx, "triton_kernel_infos.a",
                                                       "triton_kernel_infos.h"]
        assert t.compiled == t.kernels and t.cached == 0 and t.compile_seconds > 0
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging left over


def test_every_script_group_and_exclusion_of_the_small_set(built, small_scripts, kernel_scripts):
    """The small set keeps every script and group of kernels/, and each target leaves out exactly the
    scripts whose PLATFORMS, MIN_SM or MAX_SM exclude it."""
    from tritonforge.pipeline.scripts.table import load_table

    report, out, _ = built
    small, full = load_table(small_scripts), load_table(kernel_scripts)
    assert [Path(s).name for s in small.scripts] == [Path(s).name for s in full.scripts]
    assert {k.group for k in small.kernels} == {k.group for k in full.kernels}
    assert len(small.kernels) < len(full.kernels) / 3
    for t in report.targets:
        doc = json.loads((out / t.target.platform / t.target.arch_name / "kernels.json").read_text())
        assert [k["name"] for k in doc["kernels"]] == [s.name for s in small.kernels if s.builds_for(t.target)]
        left_out = {Path(s.script).name for s in small.kernels if not s.builds_for(t.target)}
        arch = int(t.target.arch) if t.target.platform == "cuda" else None
        expected = {Path(s.script).name for s in small.kernels
                    if t.target.platform not in s.platforms
                    or (arch is not None and not s.min_sm <= arch <= (s.max_sm or arch))}
        assert left_out == expected
        assert left_out == {"sm_80": {"softmax_cluster_triton.py", "group_norm_cluster_triton.py"},  # MIN_SM
                            "sm_90": {"group_norm_parts_triton.py"},  # MAX_SM
                            "gfx942": {"softmax_cluster_triton.py", "group_norm_cluster_triton.py",
                                       "softmax_packed_triton.py"}}[t.target.arch_name]  # PLATFORMS


def test_manifest_describes_every_kernel(built, small_scripts):
    import hashlib

    from tritonforge.pipeline.scripts.abi import c_layout
    from tritonforge.pipeline.scripts.table import load_table

    report, out, _ = built
    table = load_table(small_scripts)
    for t in report.targets:
        d = out / t.target.platform / t.target.arch_name
        doc = json.loads((d / "kernels.json").read_text())
        assert doc["triton_version"] == "3.5.0"
        assert doc["target"]["warp_size"] == (32 if t.target.backend == "cuda" else 64)
        assert doc["archive"]["sha256"] == hashlib.sha256(read(d / "triton_kernel_infos.a")).hexdigest()
        assert doc["header"]["sha256"] == hashlib.sha256(read(d / "triton_kernel_infos.h")).hexdigest()
        # Table order, less the kernels whose script does not build for this target.
        assert [k["name"] for k in doc["kernels"]] == [s.name for s in table.kernels if s.builds_for(t.target)]
        assert any("_packed_" in k["name"] for k in doc["kernels"]) == (t.target.platform == "cuda")
        for k in doc["kernels"]:
            assert k["symbol"] == f"_binary_{k['name']}_{t.target.binary_ext}_start"
            assert k["threads_per_block"] == k["warp_size"] * k["num_warps"]
            slots, _ = c_layout([p["size"] for p in k["params"]])
            assert [p["offset"] for p in k["params"]] == [s.offset for s in slots]
            # Triton 3.5 appends global_scratch and profile_scratch after the runtime arguments.
            end = slots[-1].offset + slots[-1].size
            first_hidden = (end + 7) // 8 * 8
            assert [(h["name"], h["offset"]) for h in k["hidden_params"]] == [
                ("global_scratch", first_hidden), ("profile_scratch", first_hidden + 8)]
            assert k["args_size"] == first_hidden + 16
        ort_groups = {f"{op}_{dt}" for op in ("softmax", "log_softmax") for dt in ("fp32", "fp16", "bf16")}
        assert ort_groups <= set(doc["groups"])
        assert all(g["contract"] for g in doc["groups"].values())
        assert doc["groups"]["softmax_fp16"]["contract"]["grid"] == ["batch", "1", "1"]
        by_name = {k["name"]: k for k in doc["kernels"]}
        assert by_name["softmax_fp16_32_w1"]["args_size"] == 48  # ORT's 32-byte struct + 2 hidden pointers
        gn = next(k for k in doc["kernels"] if k["group"] == "GroupNormTriton_Silu_fp16")
        assert gn["args_size"] == 96  # ORT's 80-byte GroupNorm struct (75 B of fields) + 2 hidden pointers


ORT_GROUP = re.compile(r"softmax_(fp32|fp16|bf16|fp64)|GroupNormTriton_(Silu|Pass)_(fp16|fp32)")  # what ORT launches


def test_ort_launchable_says_what_a_plain_launch_can_run(built):
    """ORT launches every kernel with a plain cuLaunchKernel / hipModuleLaunchKernel: kernels launched in
    clusters or as cooperative grids are flagged with the reason; ORT's own groups are launchable."""
    report, out, _ = built
    kinds = set()
    for t in report.targets:
        doc = json.loads((out / t.target.platform / t.target.arch_name / "kernels.json").read_text())
        for k in doc["kernels"]:
            contract = doc["groups"][k["group"]]["contract"] or {}
            reasons = []
            if contract.get("cluster"):
                reasons.append("thread-block clusters")
            if contract.get("cooperative"):
                reasons.append("cooperative grid")
            if t.target.backend == "cuda" and k["shared"] > 48 * 1024:
                reasons.append("shared memory")
            assert k["ort_launchable"] == (not reasons), (k["name"], k["ort_notes"])
            assert all(any(r in note for note in k["ort_notes"]) for r in reasons), (k["name"], k["ort_notes"])
            kinds.update(reasons)
            if ORT_GROUP.fullmatch(k["group"]):
                assert k["ort_launchable"], k["name"]
        flagged = {}  # what the build's summary warns about
        for k in doc["kernels"]:
            if not k["ort_launchable"]:
                flagged.setdefault(k["group"], []).append(k["name"])
        assert t.not_ort_launchable == flagged
    assert {"thread-block clusters", "cooperative grid"} <= kinds


def test_archive_members_in_table_order_without_owner_or_time(built):
    report, out, _ = built
    a = out / "cuda" / "sm_90" / "triton_kernel_infos.a"
    members = subprocess.run(["ar", "tv", str(a)], capture_output=True, text=True, check=True).stdout.splitlines()
    doc = json.loads((a.parent / "kernels.json").read_text())
    assert [m.split()[-1] for m in members] == [f"{k['name']}.o" for k in doc["kernels"]]
    assert all(" 0/0 " in m and "1970" in m for m in members)  # ar D: no uid/gid/mtime


def test_clean_rebuild_elsewhere_is_byte_identical(built, small_scripts, tmp_path, monkeypatch):
    """Two scripts compiled again from scratch (own empty cache, another directory, another working
    directory, a second later) give the same binaries. Every kernel of the small set is compiled again
    in a container by tests/test_tasks.py and compared file for file."""
    report, out, _ = built
    some = [s for s in small_scripts if s.name in ("softmax_cluster_triton.py", "softmax_stream_triton.py")]
    assert len(some) == 2
    monkeypatch.chdir(tmp_path)
    again = build_dist(some, parse_targets("sm_90,gfx942"), tmp_path / "dist2", cache_dir=tmp_path / "c2", jobs=2)
    assert again.compiled == sum(t.kernels for t in again.targets) > 0
    for sub in ("cuda/sm_90", "rocm/gfx942"):
        full = {k["name"]: k for k in json.loads(read(out / sub / "kernels.json"))["kernels"]}
        subset = json.loads(read(tmp_path / "dist2" / sub / "kernels.json"))["kernels"]
        assert subset and all(k["binary"] == full[k["name"]]["binary"] for k in subset), f"{sub} differs"


def test_warm_rebuild_compiles_nothing_and_writes_the_same_bytes(built, small_scripts, tmp_path):
    report, out, cache = built
    warm = build_dist(small_scripts, parse_targets(TEST_TARGETS), tmp_path / "dist3", cache_dir=cache, jobs=2)
    assert warm.compiled == 0 and warm.cached == sum(t.kernels for t in warm.targets)
    for t in warm.targets:
        sub = f"{t.target.platform}/{t.target.arch_name}"
        for name in ("triton_kernel_infos.a", "triton_kernel_infos.h", "kernels.json"):
            assert read(tmp_path / "dist3" / sub / name) == read(out / sub / name), f"{sub}/{name}"


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


def test_ort_drop_in_cli(root, tmp_path, built, small_scripts):
    """ORT's flags: header and archive where asked, --ort_root ignored, kernels.json beside the archive."""
    _, out, cache = built
    env = {**os.environ, "PYTHONPATH": str(root)}
    scripts = [str(p) for p in small_scripts]
    proc = subprocess.run(
        [sys.executable, "-m", "tritonforge.pipeline.compile_triton", "--header", "inc/triton_kernel_infos.h",
         "--ort_root", "/nonexistent", "--script_files", *scripts, "--cache_dir", str(cache),
         "--obj_file", "lib/triton_kernel_infos.a", "--target", "cuda:90", "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert read(tmp_path / "lib/triton_kernel_infos.a") == read(out / "cuda/sm_90/triton_kernel_infos.a")
    assert read(tmp_path / "inc/triton_kernel_infos.h") == read(out / "cuda/sm_90/triton_kernel_infos.h")
    assert (tmp_path / "lib/kernels.json").is_file()
    assert sorted(p.name for p in (tmp_path / "lib").iterdir()) == ["kernels.json", "triton_kernel_infos.a"]


def test_pin_is_enforced(monkeypatch, tmp_path):
    import pytest
    from tritonforge.pipeline.compile import pin
    from tritonforge.pipeline.errors import PipelineError

    assert pin.pinned_version() == "3.5.0"
    monkeypatch.setattr(pin, "installed_version", lambda: "9.9.9")
    with pytest.raises(PipelineError, match="pins 3.5.0.*--allow-unpinned-triton"):
        pin.check_pin()
    assert pin.check_pin(allow_unpinned=True) == "9.9.9"
