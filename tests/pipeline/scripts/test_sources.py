"""What a kernel depends on: the part of its script its jit function reaches, its helpers, the constants it reads.
An edit it cannot see leaves its compile-cache key; one it can see changes it."""

from __future__ import annotations

import pytest

pytest.importorskip("triton")

from tritonforge.pipeline.builds.dist import discover_scripts, kernel_key  # noqa: E402
from tritonforge.pipeline.compile.targets import parse_target  # noqa: E402
from tritonforge.pipeline.scripts.table import load_table  # noqa: E402

SCRIPT = '''"""Two kernels, a helper, a constant, a table."""
import triton
import triton.language as tl
from _helper_for_sources import one

SCALE = {scale}
UNUSED = 1


@triton.jit
def twice(x):
    return x * SCALE


@triton.jit
def a_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, twice(offs + one()))


@triton.jit
def b_kernel(out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, offs)
{extra}

def get_function_table():
{table_body}    return [{{"name": f"{{f.__name__}}_{{b}}", "group": f.__name__, "func": f, "sig": "*i32",
             "kwargs": {{"num_warps": 1, "constants": {{"BLOCK": b}}}}}}
            for f in (a_kernel, b_kernel) for b in {blocks}]
'''


def keys(d, scale="2", extra="", table_body="", blocks="(16,)", helper="1") -> dict[str, str]:
    d.mkdir(exist_ok=True)
    (d / "_helper_for_sources.py").write_text(f"import triton\n\n\n@triton.jit\ndef one():\n    return {helper}\n")
    (d / "k_triton.py").write_text(SCRIPT.format(scale=scale, extra=extra, table_body=table_body, blocks=blocks))
    target = parse_target("sm_90")
    return {k.name: kernel_key(k, target, "3.9.0") for k in load_table(discover_scripts(d)).kernels}


def test_what_a_kernel_cannot_reach_leaves_its_key(tmp_path):
    base = keys(tmp_path / "base")
    assert len(set(base.values())) == 2
    same = {"a table with one more variant": dict(blocks="(16, 32)"),
            "a new def and constant": dict(extra="\n\ndef unrelated():\n    return UNUSED + 1\n\nOTHER = 3\n"),
            "the table function rewritten": dict(table_body="    print('tables')\n"),
            "another kernel": dict(extra="\n\n@triton.jit\ndef c_kernel(out_ptr):\n    tl.store(out_ptr, 1)\n")}
    for why, change in same.items():
        changed = keys(tmp_path / why.replace(" ", "_"), **change)
        assert {n: changed[n] for n in base} == base, why


def test_what_a_kernel_reaches_changes_its_key(tmp_path):
    base = keys(tmp_path / "base")
    for why, change, moved in (
            ("a constant a jit helper reads", dict(scale="3"), {"a_kernel_16"}),
            ("a helper file the script imports", dict(helper="2"), {"a_kernel_16", "b_kernel_16"}),
            ("the table function rebinds the constant", dict(table_body="    globals()['SCALE'] = 5\n"),
             {"a_kernel_16"}),
            ("a function declaring a global: kept for every kernel",
             dict(extra="\n\ndef setup():\n    global UNUSED\n    UNUSED = 2\n"), {"a_kernel_16", "b_kernel_16"}),
            ("top-level code after the kernels", dict(extra="\nSCALE = SCALE + 1\n"), {"a_kernel_16"})):
        changed = keys(tmp_path / why.replace(" ", "_"), **change)
        assert {n for n in base if changed[n] != base[n]} == moved, why


def test_the_small_set_shares_the_full_scripts_keys(root, small_scripts):
    """The tests' small kernel set (each table cut down by a footer) compiles to the very cache entries the
    whole scripts do: a build of either reuses what the other compiled."""
    target = parse_target("sm_90")
    full = {k.name: kernel_key(k, target, "3.9.0") for k in load_table(discover_scripts(root / "kernels")).kernels}
    small = {k.name: kernel_key(k, target, "3.9.0") for k in load_table(small_scripts).kernels}
    assert small and {n: full[n] for n in small} == small
