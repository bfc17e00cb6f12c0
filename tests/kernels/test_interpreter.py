"""Kernel numerics on every change, without a GPU: the first kernel of every group that Triton's
interpreter can run, on an awkward problem its own launch contract admits, against float64. The
kernels it cannot run are named with the reason. And the two copies of the softmax row (ORT compiles
softmax_triton.py alone, so that script cannot import the helper) are kept identical."""

from __future__ import annotations

import ast

import pytest

pytest.importorskip("triton", reason="kernel scripts import triton")

from tritonforge.pipeline.builds import numerics_check  # noqa: E402
from tritonforge.pipeline.scripts.table import load_table  # noqa: E402


@pytest.fixture(scope="module")
def interpreted(root):
    table = load_table(sorted((root / "kernels").glob("*_triton.py")))
    firsts, skipped = numerics_check.select(table)
    return firsts, skipped, numerics_check.check(root / "kernels", timeout=400)


def test_every_interpretable_group_matches_float64(interpreted):
    firsts, _, result = interpreted
    assert [r["name"] for r in result["checked"]] == [k["name"] for k in firsts]
    failed = [f"{r['name']} on {r['problem']}: {r['error']}" for r in result["checked"] if r["error"]]
    assert not failed, "\n".join(failed)
    assert result["passed"] and result["triton"] == __import__("triton").__version__


def test_what_the_interpreter_cannot_run_is_named(interpreted):
    firsts, skipped, result = interpreted
    assert result["skipped"] == skipped
    groups = {k["group"] for k in firsts}
    families = {g.split("_")[0] for g in groups}
    # ORT's groups and both fallbacks run; what is left out says why
    assert {"softmax", "log", "GroupNormTriton", "GroupNormAny", "GroupNormWhole", "GroupNormNCHW"} <= families
    assert any(g.startswith("softmax_any_") for g in groups) and any(g.startswith("softmax_rows_") for g in groups)
    assert any(k["constants"].get("FLAT") for k in firsts)  # the flat pass 1 and the VEC kernels too
    assert any(k["constants"].get("VEC") and k["group"].startswith("GroupNormTriton") for k in firsts)
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


def test_the_interpreter_patches_stay_out_of_a_process_that_compiles(root):
    """Imported without TRITON_INTERPRET (a walk over every module does so), the patches would put host stand-ins
    for libdevice into every kernel the process compiles after: they apply under the interpreter only."""
    import os
    import subprocess
    import sys

    probe = ("import tritonforge.pipeline.builds.interpreter; from triton.language.extra import libdevice; "
             "print(libdevice.fast_expf.__name__)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    said = [subprocess.run([sys.executable, "-c", probe], env=e, cwd=root, capture_output=True, text=True)
            for e in (env, {**env, "TRITON_INTERPRET": "1"})]
    assert [p.stdout.strip() for p in said] == ["fast_expf", "<lambda>"], [p.stderr[-500:] for p in said]
