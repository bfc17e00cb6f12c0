"""The custom-op library's build: the launch contracts compiled to C++ decide exactly what the Python
runtime decides, the library links a build's archive and refuses what it cannot use."""

from __future__ import annotations

import json
import random
import subprocess

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package.ortlib import (
    SOURCE_DIR,
    build_library,
    kernel_table,
    op_of,
    roles,
    tune_caches,
    write_tune_file,
)
from tritonforge.runtime.expressions import evaluate

from ...conftest import ROOT, require_tool

HARNESS = r"""
#include <cstdio>
#include "table.h"
using namespace tf;
int main() {
  Problem p;
  long long resident;
  while (scanf("%lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld", &p.n, &p.hw, &p.c,
               &p.groups, &p.c_per_group, &p.silu, &p.batch, &p.n_cols, &resident, &p.heads, &p.sq, &p.skv,
               &p.head_dim, &p.strides8) == 14) {
    p.in_stride = p.out_stride = p.n_cols;
    p.resident = resident;
    for (int g = 0; g < kGroupCount; ++g)
      for (int i = kGroups[g].first; i < kGroups[g].first + kGroups[g].count; ++i) {
        const KernelEntry& k = kKernels[i];
        int64_t grid[3] = {0, 0, 0};
        bool ok = kGroups[g].requires(k.constants, k.num_warps, p);
        if (ok) kGroups[g].grid(k.constants, k.num_warps, p, grid);
        long long ws = ok && kGroups[g].workspace ? kGroups[g].workspace(k.constants, k.num_warps, p) : -1;
        printf("%s %d %lld %lld %lld %lld\n", k.name, ok ? 1 : 0, (long long)grid[0], (long long)grid[1],
               (long long)grid[2], ws);
      }
  }
}
"""


def problems(rng: random.Random, n: int = 60) -> list[dict]:
    out = []
    for _ in range(n):
        groups = rng.choice([1, 2, 4, 8, 32])
        cpg = rng.choice([1, 3, 4, 8, 10, 16, 30, 40, 64, 80, 128, 160])
        cols = rng.choice([1, 7, 16, 64, 77, 128, 197, 1000, 1024, 4096, 32000, 50257])
        out.append({"n": rng.choice([1, 2, 3]), "hw": rng.choice([1, 7, 49, 64, 256, 1024, 4096, 65536]),
                    "c": groups * cpg, "groups": groups, "c_per_group": cpg, "silu": rng.choice([0, 1]),
                    "batch": rng.choice([1, 5, 128, 4096]), "n_cols": cols, "resident": rng.choice([132, 1056]),
                    "heads": rng.choice([1, 8, 20]), "sq": rng.choice([1, 77, 1024, 4097]),
                    "skv": rng.choice([1, 77, 4096]), "head_dim": rng.choice([8, 40, 64, 72, 80, 160, 256, 512]),
                    "strides8": rng.choice([0, 1])})
    return out


def test_compiled_contracts_agree_with_the_python_runtime(built, tmp_path):
    require_tool("g++", "the generated table is compiled")
    d = built[1] / "cuda" / "multi"
    doc = json.loads((d / "kernels.json").read_text())
    table, groups = kernel_table(doc)
    assert groups >= 8
    (tmp_path / "kernel_table.cc").write_text(table)
    (tmp_path / "harness.cc").write_text(HARNESS)
    exe = tmp_path / "harness"
    subprocess.run(["g++", "-std=c++17", "-O1", f"-I{SOURCE_DIR}", str(tmp_path / "harness.cc"),
                    str(tmp_path / "kernel_table.cc"), "-Wl,--whole-archive", str(d / "triton_kernel_infos.a"),
                    "-Wl,--no-whole-archive", "-o", str(exe)], check=True, capture_output=True)
    probs = problems(random.Random(7))
    stdin = "".join(" ".join(str(p[k]) for k in ("n", "hw", "c", "groups", "c_per_group", "silu", "batch",
                                                   "n_cols", "resident", "heads", "sq", "skv", "head_dim",
                                                   "strides8")) + "\n" for p in probs)
    lines = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, check=True).stdout.splitlines()
    kernels = {k["name"]: k for k in doc["kernels"]}
    served = [k for k in doc["kernels"] if op_of(k["group"], doc["groups"][k["group"]].get("contract"))]
    assert len(lines) == len(probs) * len(served)
    admitted = 0
    for j, line in enumerate(lines):
        name, ok, gx, gy, gz, ws = line.split()
        p, k = probs[j // len(served)], kernels[name]
        contract = doc["groups"][k["group"]]["contract"]
        scope = {**p, "in_stride": p["n_cols"], "out_stride": p["n_cols"], **k["constants"],
                 "num_warps": k["num_warps"]}
        want = all(evaluate(r, scope) for r in contract["requires"])
        assert bool(int(ok)) == want, (name, p)
        if want:
            admitted += 1
            assert [int(gx), int(gy), int(gz)] == [evaluate(g, scope) for g in contract["grid"]], (name, p)
            if "workspace" in contract:
                assert int(ws) == evaluate(contract["workspace"], scope)
    assert admitted > 50  # the problems reach many kernels, not only refusals


def test_every_role_a_served_contract_uses_is_one_the_library_knows(built):
    doc = json.loads((built[1] / "cuda" / "multi" / "kernels.json").read_text())
    known = set(roles())
    for group, entry in doc["groups"].items():
        if op_of(group, entry.get("contract")):
            assert set(entry["contract"]["params"]) <= known, group
    kinds = {op_of(g, e.get("contract"))[0] for g, e in doc["groups"].items() if op_of(g, e.get("contract"))}
    assert kinds == {"nhwc", "nchw", "softmax", "log_softmax", "attention", "ada_layer_norm", "rotary_embedding",
                     "bias_concat", "bias_split_gelu"}


def test_a_rocm_build_or_a_missing_build_is_refused(built, tmp_path):
    with pytest.raises(PipelineError, match="the ORT library is CUDA only"):
        build_library(built[1] / "rocm" / "multi", ROOT / ".cache" / "tritonforge", tmp_path / "x.so")
    with pytest.raises(PipelineError, match="kernels.json: missing; build first"):
        build_library(tmp_path / "nothing", ROOT / ".cache" / "tritonforge", tmp_path / "x.so")
    assert not (tmp_path / "x.so").exists()


def test_a_contract_naming_an_unknown_variable_stops_the_table(built):
    doc = json.loads((built[1] / "cuda" / "multi" / "kernels.json").read_text())
    group = next(g for g, e in doc["groups"].items() if op_of(g, e.get("contract")))
    doc["groups"][group]["contract"]["requires"].append("warp_specialized > 0")
    with pytest.raises(PipelineError, match=f"group {group}: 'warp_specialized > 0' uses 'warp_specialized'"):
        kernel_table(doc)


def test_the_tune_file_takes_what_the_build_holds_and_refuses_foreign_caches(built, tmp_path):
    multi = built[1] / "cuda" / "multi"
    doc = json.loads((multi / "kernels.json").read_text())
    kernel = next(k["name"] for k in doc["kernels"] if k["group"].startswith("GroupNorm"))
    lib = tmp_path / "libtritonforge_ort.so"

    def cache(name, target="sm_90", triton=doc["triton_version"], schema="tritonforge.tune/1", results=None):
        path = tmp_path / "tune" / "cuda" / target / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schema": schema, "validators": {
            "target": target, "triton_version": triton, "device_model": name.removesuffix(".json")},
            "results": results if results is not None else {"group_norm_silu_fp16": {
                "2_4096_320_32_silu_noskip_nobroadcast_nobias": {"kernel": kernel}}}}))
        return path

    cache("NVIDIA H200.json")
    cache("NVIDIA A100.json", "sm_80", results={"softmax_fp16": {"1_77": {"kernel": "softmax_gone_fp16"}}})
    out, notes = write_tune_file(lib, multi, tune_caches(tmp_path / "tune"))
    assert out == tmp_path / "libtritonforge_ort.tune"
    assert out.read_text().splitlines()[1:] == [
        f"NVIDIA H200\tgroup_norm_silu_fp16\t2_4096_320_32_silu_noskip_nobroadcast_nobias\t{kernel}"]
    assert len(notes) == 1 and "NVIDIA A100.json: 1 choices name kernels this build does not hold" in notes[0]
    # nothing left to take: the stale file goes with its caches
    assert write_tune_file(lib, multi, []) == (None, []) and not out.exists()
    for bad, says in ((cache("x.json", "sm_75"), "made for sm_75"),
                      (cache("y.json", triton="2.1.0"), "with triton 2.1.0"),
                      (cache("z.json", schema="other/1"), "not a tritonforge.tune/1 file")):
        with pytest.raises(PipelineError, match=says):
            write_tune_file(lib, multi, [bad])
        assert not out.exists()


def test_kernels_some_archs_cannot_build_join_the_library_as_blobs_of_the_archs_that_do(built, ort_library, tmp_path):
    """The cluster kernels (MIN_SM = 90) and the parts kernels (MAX_SM = 89) are left out of the sm_80+sm_90
    multi build (ORT's header launches every kernel on every arch); the library links them as fatbins of the
    archs that built them, which a device of another arch skips when it cannot load them."""
    import shutil

    from tritonforge.pipeline.package.containers import list_fatbin
    from tritonforge.pipeline.package.multi import partial
    from tritonforge.runtime import ortlib

    multi = built[1] / "cuda" / "multi"
    doc = json.loads((multi / "kernels.json").read_text())
    left = {k["name"]: k for k in doc["left_out"]}
    assert {tuple(k["archs"]) for k in left.values()} == {("sm_80",), ("sm_90",)}, left
    entries, blobs, contracts = partial(multi)
    assert [e["name"] for e in entries] == list(left) and set(contracts) == {k["group"] for k in left.values()}
    for name, ext, blob in blobs[:: max(1, len(blobs) // 4)]:
        (tmp_path / f"{name}.{ext}").write_bytes(blob)
        listed = " ".join(list_fatbin(tmp_path / f"{name}.{ext}", name))
        (arch,) = left[name]["archs"]
        other = {"sm_80": "sm_90", "sm_90": "sm_80"}[arch]
        assert arch in listed and other not in listed, (name, listed)
    served = {k["name"] for k in entries if op_of(k["group"], contracts[k["group"]])}
    got = ortlib.info(ort_library)
    assert got["kernels"] == len(kernel_table(doc)[0].split("const KernelEntry kKernels[] = {")[1].split(
        "};")[0].strip().splitlines()) + len(served)
    assert {k["group"] for k in entries} <= set(got["groups"])
    alone = tmp_path / "fetched" / "multi"  # a multi fetched without its per-arch builds: nothing to add
    shutil.copytree(multi, alone)
    assert partial(alone) == ([], [], {})
