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
            ("the table function rebinds the constant", dict(table_body="    global SCALE\n    SCALE = 5\n"),
             {"a_kernel_16", "b_kernel_16"}),
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


ALL = {"a_kernel_16", "b_kernel_16"}
# Edits that change what a kernel compiles to from code the reachability walk does not follow (the script does more
# than define): each moves every key of the script, which then counts the whole script and every file beside it.
UNSEEN = {
    "a helper module's attribute set by the table function":
        dict(extra="\nimport _helper_for_sources\n", table_body="    _helper_for_sources.LOWEST = -1e30\n"),
    "a list constexpr changed in place":
        dict(extra="\nGAIN = tl.constexpr([1.0, 2.0])\n", table_body="    GAIN.value[0] = 2.0\n"),
    "globals() given a non-scalar": dict(table_body="    globals()['ACC'] = tl.float16\n"),
    "a jit function reading sys.modules":
        dict(extra="\nimport sys\nGAIN = 1.0\n\n\n@triton.jit\ndef gain():\n    return sys.modules[__name__].GAIN\n"),
    "a helper loaded by importlib":
        dict(extra="\nimport importlib\n_h = importlib.import_module('_helper_for_sources')\n"),
    "setattr": dict(table_body="    setattr(tl, 'float8', tl.float16)\n"),
    "exec": dict(table_body="    exec('SCALE = 4')\n"),
    "a mutating method of a module constant": dict(extra="\nEXTRA = []\n", table_body="    EXTRA.append(1)\n"),
    "an alias of a constant changed": dict(extra="\nGAIN = tl.constexpr([1.0])\n",
                                           table_body="    g = GAIN.value\n    g[0] = 3.0\n"),
    "a call whose effects are not read": dict(extra="\nimport os\n", table_body="    os.putenv('X', '1')\n"),
    "a data file read": dict(table_body="    open(__file__).read()\n"),
}


@pytest.mark.parametrize("why", list(UNSEEN))
def test_code_the_walk_cannot_follow_makes_every_key_count_the_whole_script(tmp_path, why):
    from tritonforge.pipeline.scripts.sources import ScriptSource, local_sources

    base = keys(tmp_path / "base")
    changed = keys(tmp_path / "changed", **UNSEEN[why])
    assert {n for n in base if changed[n] != base[n]} == ALL, why
    script = tmp_path / "changed" / "k_triton.py"
    assert ScriptSource(script, local_sources(script)).unseen, why  # and says where
    # from then on any edit to the script or a file beside it moves every key, even one the walk would not see
    (tmp_path / "changed" / "notes.txt").write_text("a file beside the script")
    again = {k.name: kernel_key(k, parse_target("sm_90"), "3.9.0")
             for k in load_table(discover_scripts(tmp_path / "changed")).kernels}
    assert {n for n in again if again[n] != changed[n]} == ALL, why


def test_a_container_the_table_function_makes_and_fills_is_only_defining(tmp_path):
    """A table built in a list or dict of the function's own (as every script in kernels/ builds it) is no effect."""
    body = "    out = {}\n    out['x'] = 1\n    rows = []\n    rows.append(out)\n    print(len(rows))\n"
    base, changed = keys(tmp_path / "base"), keys(tmp_path / "changed", table_body=body)
    assert changed == base


def test_a_list_a_jit_function_reads_is_recorded_as_it_holds(tmp_path):
    """A constexpr list changed in place by an alias the rules take for the function's own container still moves
    the key of the kernel that reads it: its contents are recorded as the script left them."""
    body = "    box = [SCALE.value]\n    box[0][0] = {v}\n"
    one, three = (keys(tmp_path / f"v{v}", scale="tl.constexpr([2.0, 3.0])", table_body=body.format(v=v))
                  for v in ("1.0", "3.0"))
    assert {n for n in one if one[n] != three[n]} == {"a_kernel_16"}  # the kernel whose helper reads SCALE


def test_no_script_in_kernels_does_more_than_define(root):
    """Every shipped script keeps the fine keys (a tuning variant added recompiles nothing else)."""
    from tritonforge.pipeline.scripts.sources import ScriptSource, local_sources

    for script in discover_scripts(root / "kernels"):
        assert ScriptSource(script, local_sources(script)).unseen == [], script
