"""A real build of kernels/: outputs, manifest, determinism, cache, and the ORT drop-in CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pipeline.build import build_dist
from pipeline.targets import parse_targets

from ..conftest import TEST_TARGETS


def read(path):
    return path.read_bytes()


def test_layout_and_counts(built):
    report, out, _ = built
    for t in report.targets:
        d = out / t.target.platform / t.target.arch_name
        assert sorted(p.name for p in d.iterdir()) == ["kernels.json", "triton_kernel_infos.a",
                                                       "triton_kernel_infos.h"]
        assert t.compiled == t.kernels and t.cached == 0
    assert not [p for p in out.iterdir() if p.name.startswith(".")]  # no staging left over


def test_manifest_describes_every_kernel(built, kernel_scripts):
    import hashlib

    from pipeline.abi import c_layout
    from pipeline.table import load_table

    report, out, _ = built
    table = load_table(kernel_scripts)
    for t in report.targets:
        d = out / t.target.platform / t.target.arch_name
        doc = json.loads((d / "kernels.json").read_text())
        assert doc["triton_version"] == "3.5.0"
        assert doc["target"]["warp_size"] == (32 if t.target.backend == "cuda" else 64)
        assert doc["archive"]["sha256"] == hashlib.sha256(read(d / "triton_kernel_infos.a")).hexdigest()
        # Table order, less the kernels whose script does not build for this platform (inline PTX).
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
            assert k["ort_launchable"], k["ort_notes"]
        ort_groups = {f"{op}_{dt}" for op in ("softmax", "log_softmax") for dt in ("fp32", "fp16", "bf16")}
        assert ort_groups <= set(doc["groups"])
        assert all(g["contract"] for g in doc["groups"].values())
        assert doc["groups"]["softmax_fp16"]["contract"]["grid"] == ["batch", "1", "1"]
        by_name = {k["name"]: k for k in doc["kernels"]}
        assert by_name["softmax_fp16_1024"]["args_size"] == 48  # ORT's 32-byte softmax struct + 2 hidden pointers
        gn = next(k for k in doc["kernels"] if k["group"] == "GroupNormTriton_Silu_fp16")
        assert gn["args_size"] == 96  # ORT's 80-byte GroupNorm struct (75 B of fields) + 2 hidden pointers


def test_archive_members_in_table_order_and_deterministic(built):
    report, out, _ = built
    a = out / "cuda" / "sm_90" / "triton_kernel_infos.a"
    members = subprocess.run(["ar", "tv", str(a)], capture_output=True, text=True, check=True).stdout.splitlines()
    doc = json.loads((a.parent / "kernels.json").read_text())
    assert [m.split()[-1] for m in members] == [f"{k['name']}.o" for k in doc["kernels"]]
    assert all(" 0/0 " in m and "1970" in m for m in members)  # ar D: no uid/gid/mtime


def test_clean_rebuild_is_byte_identical_and_warm_rebuild_compiles_nothing(built, kernel_scripts, tmp_path):
    """A second clean build, with its own empty cache and from another directory, compiles the same
    bytes. Two scripts stand for the rest here (every kernel of kernels/ is rebuilt clean, in a
    container, by tests/pipeline/test_images.py, and compared archive for archive)."""
    report, out, cache = built
    some = [s for s in kernel_scripts if s.name in ("softmax_split_triton.py", "group_norm_split_triton.py")]
    assert len(some) == 2
    other = tmp_path / "dist2"
    again = build_dist(some, parse_targets(TEST_TARGETS), other, cache_dir=tmp_path / "cache2", jobs=2)
    assert again.compiled == sum(t.kernels for t in again.targets) > 0
    for sub in ("cuda/sm_90", "rocm/gfx942"):
        full = {k["name"]: k for k in json.loads(read(out / sub / "kernels.json"))["kernels"]}
        subset = json.loads(read(other / sub / "kernels.json"))["kernels"]
        assert subset and all(k["binary"] == full[k["name"]]["binary"] for k in subset), f"{sub} differs"
    # Warm: the first build's cache serves every kernel, and the output is the same again.
    warm = build_dist(kernel_scripts, parse_targets(TEST_TARGETS), tmp_path / "dist3", cache_dir=cache, jobs=2)
    assert warm.compiled == 0 and warm.cached == sum(t.kernels for t in warm.targets)
    assert read(tmp_path / "dist3/cuda/sm_90/triton_kernel_infos.a") == read(out / "cuda/sm_90/triton_kernel_infos.a")


def test_corrupt_cache_entry_is_recompiled_not_shipped(tmp_path, root):
    from .bad_scripts import GOOD, table

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


def test_ort_drop_in_cli(root, tmp_path, built):
    """ORT's flags: header and archive where asked, --ort_root ignored, kernels.json beside the archive."""
    _, out, cache = built
    env = {**os.environ, "PYTHONPATH": str(root)}
    scripts = [str(p) for p in sorted((root / "kernels").glob("*.py")) if not p.name.startswith("_")]
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline.compile_triton", "--header", "inc/triton_kernel_infos.h",
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

    from pipeline import pin
    from pipeline.errors import PipelineError

    assert pin.pinned_version() == "3.5.0"
    monkeypatch.setattr(pin, "installed_version", lambda: "9.9.9")
    with pytest.raises(PipelineError, match="pins 3.5.0.*--allow-unpinned-triton"):
        pin.check_pin()
    assert pin.check_pin(allow_unpinned=True) == "9.9.9"
