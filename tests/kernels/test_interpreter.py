"""Kernel numerics on every change, without a GPU: the first kernel of every group that Triton's
interpreter can run, on an awkward problem its own launch contract admits, against float64. The
kernels it cannot run are named with the reason. And the two copies of the softmax row (ORT compiles
softmax_triton.py alone, so that script cannot import the helper) are kept identical."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton", reason="kernel scripts import triton")

from tritonforge.pipeline.scripts.table import load_table  # noqa: E402


def why_not_interpreted(kernel, contract) -> str | None:
    """Why the interpreter cannot run this kernel's programs (one at a time, no device), or None."""
    if contract is None:
        return "no launch contract"
    if kernel.platforms == ("cuda",):
        return "inline PTX (PLATFORMS = cuda)"
    if contract.get("cooperative"):
        return "a cooperative grid: its programs wait for one another, the interpreter runs one at a time"
    if contract.get("cluster"):
        return "thread-block clusters"
    return None


@pytest.fixture(scope="module")
def interpreted(root, tmp_path_factory):
    table = load_table(sorted((root / "kernels").glob("*_triton.py")))
    firsts, skipped = {}, {}
    for k in table.kernels:
        # each group's first kernel, and the first of each code path a constant selects (GroupNorm's
        # FLAT pass 1, a VEC of its own)
        key = (k.group, k.constants.get("FLAT", 0), k.constants.get("VEC", 0) > 0 and "BLOCK_SIZE" in k.constants)
        if key in firsts or k.group in skipped:
            continue
        why = why_not_interpreted(k, table.contracts[k.group])
        if why:
            skipped[k.group] = why
        else:
            firsts[key] = {"script": k.script, "name": k.name, "group": k.group, "constants": k.constants,
                           "num_warps": k.num_warps, "contract": table.contracts[k.group]}
    spec = tmp_path_factory.mktemp("interpret") / "spec.json"
    spec.write_text(json.dumps(list(firsts.values())))
    proc = subprocess.run([sys.executable, "-m", "tests.kernels.interpret_worker", str(spec)], cwd=root,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return firsts, skipped, results


def test_every_interpretable_group_matches_float64(interpreted):
    firsts, _, results = interpreted
    assert [r["name"] for r in results] == [k["name"] for k in firsts.values()]
    failed = [f"{r['name']} on {r['problem']}: {r['error']}" for r in results if r["error"]]
    assert not failed, "\n".join(failed)


def test_what_the_interpreter_cannot_run_is_named(interpreted):
    firsts, skipped, _ = interpreted
    groups = {k["group"] for k in firsts.values()}
    families = {g.split("_")[0] for g in groups}
    # ORT's groups and both fallbacks run; what is left out says why
    assert {"softmax", "log", "GroupNormTriton", "GroupNormAny", "GroupNormWhole", "GroupNormNCHW"} <= families
    assert any(g.startswith("softmax_any_") for g in groups) and any(g.startswith("softmax_rows_") for g in groups)
    assert any(k["constants"].get("FLAT") for k in firsts.values())  # the flat pass 1 and the VEC kernels too
    assert any(k["constants"].get("VEC") and k["group"].startswith("GroupNormTriton") for k in firsts.values())
    reasons = set(skipped.values())
    assert reasons <= {"inline PTX (PLATFORMS = cuda)", "thread-block clusters",
                       "a cooperative grid: its programs wait for one another, the interpreter runs one at a time"}
    assert any(g.startswith("GroupNormNCHWTeam_") for g in skipped)
    assert any(g.startswith("GroupNormSplit_") for g in skipped) and any(g.startswith("softmax_cluster_")
                                                                          for g in skipped)


def _function_source(path, name: str) -> str:
    """A function's code as a syntax tree: its name and docstring left out."""
    tree = ast.parse(path.read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    fn.name = "row"
    fn.body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return ast.dump(fn, include_attributes=False)


def test_the_two_copies_of_the_softmax_row_are_identical(root):
    kernels = root / "kernels"
    assert _function_source(kernels / "softmax_triton.py", "_row") == \
        _function_source(kernels / "_softmax_row.py", "normalize_row")
