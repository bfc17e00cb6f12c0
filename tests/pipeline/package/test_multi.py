"""The multi-arch build: one archive whose blobs hold every built arch (fatbins on CUDA, offload bundles on
ROCm), checked with NVIDIA's and LLVM's own tools, and merges of per-arch builds byte-identical to one build."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package.consumer_check import check_artifacts
from tritonforge.pipeline.package.containers import clang_offload_bundler, cuobjdump
from tritonforge.pipeline.package.multi import write_multi
from tritonforge.runtime.artifacts import load_artifacts

from tritonforge.artifact_format import LIBRARY_NAME

from ...cli import invoke, seed_cache, user_repo


def manifest(d):
    return json.loads((d / "kernels.json").read_text())


def test_cuda_multi_holds_each_cubin_and_the_newest_ptx(built, tmp_path):
    _report, out, _ = built
    multi, per_arch = out / "cuda/multi", {a: load_artifacts(out / "cuda" / a) for a in ("sm_80", "sm_90")}
    doc = manifest(multi)
    assert doc["target"]["arch"] == "multi" and doc["target"]["archs"] == ["sm_80", "sm_90"]
    both = [k["name"] for k in manifest(out / "cuda/sm_80")["kernels"] if k["name"] in per_arch["sm_90"].blobs]
    assert [k["name"] for k in doc["kernels"]] == both
    left = {k["name"]: k["archs"] for k in doc["left_out"]}
    assert set(left) == ({k.name for a in per_arch.values() for k in a.kernels} - set(both))
    assert {tuple(a) for a in left.values()} == {("sm_80",), ("sm_90",)}  # MAX_SM and MIN_SM scripts
    blobs = load_artifacts(multi).blobs
    tool = cuobjdump()
    shared = {a: {x.name: x.shared for x in art.kernels} for a, art in per_arch.items()}
    for k in doc["kernels"]:
        # the newest PTX where ptxas retargets it to plain sm_90; Hopper's wgmma (attention's dots) it cannot
        newest = [] if k.get("ptx_note") else [("ptx", "sm_90")]
        assert [(c["kind"], c["arch"]) for c in k["contents"]] == [("cubin", "sm_80"), ("cubin", "sm_90a"),
                                                                    *newest, ("ptx", "sm_80")], k["name"]
        assert newest or k["group"].startswith("attention"), k["name"]
        assert k["shared"] == max(shared[a][k["name"]] for a in shared)  # header: the largest of any arch
    # The cubins inside are the per-arch builds' bytes, unchanged (cuobjdump extracts them).
    name = next(k["name"] for k in doc["kernels"] if not k.get("ptx_note"))
    (tmp_path / "k.fatbin").write_bytes(blobs[name])
    subprocess.run([tool, "-xelf", "all", "k.fatbin"], cwd=tmp_path, check=True, capture_output=True)
    extracted = sorted(p.read_bytes() for p in tmp_path.glob("*.cubin"))
    assert extracted == sorted(per_arch[a].blobs[name] for a in per_arch)
    # The build keeps Triton's PTX (sm_90a: only an sm_90 may load it); the fatbin carries it retargeted
    # to sm_90, which ptxas assembled, so a newer GPU can JIT-compile it.
    entry = next(k for k in manifest(out / "cuda/sm_90")["kernels"] if k["name"] == name)
    ptx = (out / "cuda/sm_90" / entry["ptx"]["file"]).read_text()
    assert re.search(r"^\.target sm_90a$", ptx, re.M)
    # The oldest arch's PTX (sm_80, portable as Triton writes it) rides along for GPUs no cubin runs on.
    subprocess.run([tool, "-xptx", "all", "k.fatbin"], cwd=tmp_path, check=True, capture_output=True)
    shipped = sorted(re.search(r"^\.target (sm_\d+)$", p.read_text(), re.M).group(1) for p in tmp_path.glob("*.ptx"))
    assert shipped == ["sm_80", "sm_90"]


def test_rocm_bundle_is_what_clang_offload_bundler_writes(built, tmp_path):
    """Our bundle of gfx942's code object is byte for byte the tool's (-type=o -bundle-align=4096)."""
    bundler = clang_offload_bundler()
    _report, out, _ = built
    doc, blobs = manifest(out / "rocm/multi"), load_artifacts(out / "rocm/multi").blobs
    hsaco = load_artifacts(out / "rocm/gfx942").blobs
    for k in doc["kernels"][:3]:
        (tmp_path / "a.hsaco").write_bytes(hsaco[k["name"]])
        subprocess.run([bundler, "-type=o", "-bundle-align=4096",
                        "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx942",
                        "-input=/dev/null", f"-input={tmp_path / 'a.hsaco'}", f"-output={tmp_path / 'b'}"], check=True)
        assert (tmp_path / "b").read_bytes() == blobs[k["name"]], k["name"]


@pytest.mark.full  # 8 s; every default-suite build still runs the consumer check on its multi directory
def test_consumer_check_lists_the_archs_inside_every_blob(built, tmp_path):
    _report, out, _ = built
    for platform in ("cuda", "rocm"):
        result = check_artifacts(out / platform / "multi")
        assert result.kernels == len(manifest(out / platform / "multi")["kernels"])
    # kernels.json claiming an arch the fatbin does not hold is caught by the listing, and named
    bad = tmp_path / "multi"
    shutil.copytree(out / "cuda/multi", bad)
    doc = manifest(bad)
    k = next(k for k in doc["kernels"] if not k.get("ptx_note"))  # one with the newest PTX too
    k["contents"] = k["contents"][:1]
    (bad / "kernels.json").write_text(json.dumps(doc))
    with pytest.raises(PipelineError, match=k["name"] + r" holds .*'ptx:sm_90'"):
        check_artifacts(bad)


@pytest.mark.full  # 11 s of compiles; the default suite keeps invoke merge's byte-identical single build
def test_merge_refuses_kernels_launched_differently_per_arch(built, tmp_path):
    _report, out, _ = built
    parts = [tmp_path / a for a in ("sm_80", "sm_90")]
    for p in parts:
        shutil.copytree(out / "cuda" / p.name, p)
    doc, other = manifest(parts[0]), {k["name"] for k in manifest(parts[1])["kernels"]}
    k = next(k for k in doc["kernels"] if k["name"] in other)  # built for both archs
    k["num_warps"] += 4
    (parts[0] / "kernels.json").write_text(json.dumps(doc))
    name = k["name"]
    with pytest.raises(PipelineError, match=rf"kernel {name}: num_warps differs across archs \(sm_80: \d+; sm_90"):
        write_multi(parts, tmp_path / "multi")
    shutil.rmtree(tmp_path / "multi", ignore_errors=True)
    shutil.copytree(out / "cuda/sm_80", parts[0], dirs_exist_ok=True)
    shutil.rmtree(parts[1] / "ptx")
    with pytest.raises(PipelineError, match=r"sm_90/ptx/.*\.ptx: missing"):
        write_multi(parts, tmp_path / "multi")
    with pytest.raises(PipelineError, match="two builds of one arch"):
        write_multi([parts[0], out / "cuda/sm_80"], tmp_path / "multi2")


@pytest.mark.full  # 13 s; the workflows' merge lines run invoke merge by default
def test_invoke_merge_of_per_arch_builds_is_the_single_build(tmp_path, small_kernels, built):
    """ci.yml's fan-out: each arch built alone (other machines), then `invoke merge` gives the bytes of one
    build of both archs, per-arch directories included."""
    repo, env = user_repo(tmp_path / "repo", small_kernels)
    seed_cache(repo, built[2])
    for arch in ("sm_80", "sm_90"):
        proc = invoke(repo, "compile", "--platform", "cuda", "--arch", arch, "--out", f"part-{arch}",
                      "--profile", "full", "--quiet", env=env)
        assert proc.returncode == 0, proc.stdout[-3000:]
    proc = invoke(repo, "merge", "--platform", "cuda", "--arch", "sm_80,sm_90", "--parts", "part-sm_80,part-sm_90",
                  "--profile", "full", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "consumer check cuda/multi: " in proc.stdout and "archs inside each blob match" in proc.stdout
    left = manifest(built[1] / "cuda/multi")["left_out"]
    assert left and all(k["name"] in proc.stdout for k in left)  # the warning names each kernel left out
    merged, single = repo / "dist/full/cuda", built[1] / "cuda"
    assert "ORT library cuda/multi: " in proc.stdout  # merge makes the custom-op library, as build does
    for d in ("sm_80", "sm_90", "multi"):
        files = sorted(p.relative_to(single / d) for p in (single / d).rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(merged / d) for p in (merged / d).rglob("*")
                               if p.is_file() and p.name != LIBRARY_NAME)
        assert all((single / d / f).read_bytes() == (merged / d / f).read_bytes() for f in files), d
    proc = invoke(repo, "merge", "--platform", "cuda", "--arch", "sm_80,sm_90", "--parts", "part-sm_80", "--profile",
                  "full", env=env)
    assert proc.returncode == 1 and "no cuda/sm_90 build in part-sm_80/full" in proc.stdout
    assert "Traceback" not in proc.stdout

