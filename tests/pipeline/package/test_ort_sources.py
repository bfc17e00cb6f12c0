"""`invoke ort-sources`: ONNX Runtime's SparseAttention folders from kernels/sparse_attention/, as typed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package import ort_sources as gen

from tests.cli import fresh_copy, invoke

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    repo = fresh_copy(tmp_path_factory.mktemp("repo") / "tritonforge")
    proc = invoke(repo, "ort-sources", "--arch", "sm_90,sm_120")
    assert proc.returncode == 0, proc.stdout
    assert "dist/ort-sources: 16 kernels for sm_90, sm_120 (Triton" in proc.stdout
    return repo / "dist" / "ort-sources"


def _cuobjdump() -> str:
    from triton.backends.nvidia.compiler import get_ptxas  # the pinned Triton ships CUDA's binary tools

    return str(Path(get_ptxas(120).path).with_name("cuobjdump"))


def test_the_folders_hold_ort_names_a_dispatcher_per_dtype_and_the_manifest_says_every_byte(generated, tmp_path):

    v1 = sorted(p.name for p in (generated / "sparse_attention_v1").iterdir())
    assert {"sparse_attention_v1_fp16_d128_n64_e1_sm90.cc", "sparse_attention_v1_bf16_d128_n64_e0_sm120.cc"} <= set(v1)
    assert "sparse_attention_dispatcher_bf16_sm90.h" in v1 and "sparse_attention_v1_api.cc" in v1
    v2 = sorted(p.name for p in (generated / "sparse_attention_v2").iterdir())
    assert "sparse_attention_v2_fp16_d128_m64_16_n64_b1_sm90.cc" in v2
    assert "sparse_attention_v2_dispatcher_fp16_sm120.h" in v2
    manifest = json.loads((generated / gen.MANIFEST_NAME).read_text())
    on_disk = {str(p.relative_to(generated)): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in generated.rglob("*") if p.is_file() and p.name != gen.MANIFEST_NAME}
    assert manifest["files"] == on_disk
    assert {k["arch"] for k in manifest["kernels"]} == {"sm_90", "sm_120"} and len(manifest["kernels"]) == 16
    # each .cc holds the cubin the manifest names, with no path of the machine that built it
    for k in manifest["kernels"]:
        text = (generated / f"sparse_attention_{k['version']}" / f"{k['name']}.cc").read_text()
        body = text[text.index("kCubin[] = {") + 12:text.index("};")]
        cubin = bytes(int(b, 16) for b in re.findall(r"0x([0-9a-f]{2})", body))
        assert hashlib.sha256(cubin).hexdigest() == k["cubin_sha256"] and cubin[:4] == b"\x7fELF"
        assert b"/home/" not in cubin and str(ROOT).encode() not in cubin and b"/tmp/" not in cubin
        if k["arch"] == "sm_120":  # Blackwell's own code, as the CUDA driver will read it
            (tmp_path / "k.cubin").write_bytes(cubin)
            elf = subprocess.run([_cuobjdump(), "-elf", str(tmp_path / "k.cubin")], capture_output=True,
                                 text=True).stdout
            assert "sm=120a" in elf, elf[:500]


def test_the_dispatcher_counts_kernels_not_bytes_and_orders_them_as_orts_algorithm_ids(generated):
    h = (generated / "sparse_attention_v1" / "sparse_attention_dispatcher_fp16_sm90.h").read_text()
    table = re.search(r"sparse_attention_fp16_sm90_kernels\[\]\)\(SparseAttentionParams&\) = \{(.*?)\};", h, re.S)
    assert [n.strip() for n in table.group(1).split(",") if n.strip()] == [
        "sparse_attention_v1_fp16_d128_n64_e1_sm90", "sparse_attention_v1_fp16_d128_n64_e0_sm90"]  # 0: even
    assert "sizeof(sparse_attention_fp16_sm90_kernels) / sizeof(sparse_attention_fp16_sm90_kernels[0])" in h
    api = (generated / "sparse_attention_v2" / "sparse_attention_v2_api.cc").read_text()
    assert "case 120:" in api and "case 90:" in api and "case 100:" not in api  # only the archs built


def test_the_bytes_are_a_function_of_the_kernels_the_triton_and_the_archs(generated, tmp_path):
    # the same compile results render to the same bytes; the generated files name no date and no path
    manifest = json.loads((generated / gen.MANIFEST_NAME).read_text())
    for rel in manifest["files"]:
        text = (generated / rel).read_bytes()
        assert str(generated).encode() not in text and b"20" + b"26-" not in text[:400]


def test_the_patch_applies_to_an_onnxruntime_tree():
    root = os.environ.get("TRITONFORGE_ORT_ROOT")
    if not root:
        pytest.skip("TRITONFORGE_ORT_ROOT names no ONNX Runtime checkout (the patch is made against 1.25)")
    git = shutil.which("git")
    proc = subprocess.run([git, "apply", "--check", str(gen.PATCH)], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_bad_archs_and_trees_are_named():
    known = "sm_75, sm_80, sm_90, sm_100, sm_103, sm_120, sm_121"
    with pytest.raises(PipelineError, match=f"'sm_86' is not one of {known}"):
        gen.parse_archs("sm_90,sm_86")
    assert gen.parse_archs("90,sm_75") == [75, 90] and gen.parse_archs(None) == list(gen.ARCHS)
    with pytest.raises(PipelineError, match="is not an ONNX Runtime checkout"):
        gen.lay_into(ROOT, ROOT)


def test_laid_into_an_onnxruntime_tree_the_generated_files_compile_with_its_own_headers(tmp_path):
    root = os.environ.get("TRITONFORGE_ORT_ROOT")
    if not root:
        pytest.skip("TRITONFORGE_ORT_ROOT names no ONNX Runtime checkout to lay the generated files into")
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to compile ORT's SparseAttention sources")
    from tritonforge.pipeline.package.ort_sparse_consumer import build

    tree = tmp_path / "ort"
    shutil.copytree(Path(root) / gen.SPARSE, tree / gen.SPARSE)
    out = tmp_path / "gen"
    compiled, triton = gen.compile_kernels(ROOT / "kernels", [90], None)
    gen.write(gen.render(compiled, [90], triton), out)
    removed = gen.lay_into(out, tree)
    assert "sparse_attention_v1_fp16_d128_n64_e0_sm90.cc" in removed  # ORT's own generated files go
    assert "args[28]" in (tree / gen.SPARSE / "sparse_attention_v1" / "sparse_attention_common.h").read_text()
    lib = build(tree, tmp_path / "libsparse.so")
    nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
    assert {"tf_sparse_v1", "tf_sparse_v2", "tf_supported"} <= {line.split()[-1] for line in nm.splitlines()}


def test_fetched_sources_lay_into_a_tree_only_where_the_patch_fits(generated, tmp_path):
    repo = generated.parent.parent
    proc = invoke(repo, "ort-sources", "--fetched", str(generated), "--ort-root", str(tmp_path))
    assert proc.returncode == 1 and "is not an ONNX Runtime checkout" in proc.stdout, proc.stdout
    sparse = tmp_path / gen.SPARSE
    (sparse / "sparse_attention_v1").mkdir(parents=True)
    (sparse / "sparse_attention.cc").write_text("// another version of ORT\n")
    (sparse / "sparse_attention_v1" / "sparse_attention_v1_fp16_d128_n64_e0_sm90.cc").write_text("// ORT's\n")
    before = sorted(p.name for p in sparse.rglob("*"))
    proc = invoke(repo, "ort-sources", "--fetched", str(generated), "--ort-root", str(tmp_path))
    assert proc.returncode == 1 and "ort-sources.patch does not apply" in proc.stdout, proc.stdout
    assert sorted(p.name for p in sparse.rglob("*")) == before  # nothing removed, nothing written
    (generated / "sparse_attention_v1" / "sparse_attention_v1_api.cc").write_text("// edited\n")
    proc = invoke(repo, "ort-sources", "--fetched", str(generated), "--ort-root", str(tmp_path))
    assert proc.returncode == 1 and "sparse_attention_v1_api.cc: missing or not what" in proc.stdout, proc.stdout


def test_both_consumers_build_from_an_onnxruntime_tree(tmp_path):
    """What the benchmark builds (`sparse_attention_bench.py --ort-root`): ours from a copy with the generated
    kernels laid in, ORT's own from an untouched copy; the tree given is left as it was."""
    root = os.environ.get("TRITONFORGE_ORT_ROOT")
    if not root:
        pytest.skip("TRITONFORGE_ORT_ROOT names no ONNX Runtime checkout to build the consumers from")
    if shutil.which("g++") is None:
        pytest.skip("g++ is needed to compile ORT's SparseAttention sources")
    from tritonforge.pipeline.package.ort_sparse_consumer import build_pair

    before = sorted(p.name for p in (Path(root) / gen.SPARSE).rglob("*"))
    ours, theirs = build_pair(Path(root), tmp_path, 90, ROOT / "kernels")
    for lib in (ours, theirs):
        nm = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True).stdout
        assert {"tf_sparse_v1", "tf_sparse_v2", "tf_supported"} <= {line.split()[-1] for line in nm.splitlines()}
    assert sorted(p.name for p in (Path(root) / gen.SPARSE).rglob("*")) == before
    v1 = "sparse_attention_v1/sparse_attention_v1_fp16_d128_n64_e0_sm90.cc"
    assert (tmp_path / "ort-ours" / gen.SPARSE / v1).read_bytes() != (Path(root) / gen.SPARSE / v1).read_bytes()
    with pytest.raises(PipelineError, match="older than every arch"):
        build_pair(Path(root), tmp_path / "old", 70, ROOT / "kernels")
