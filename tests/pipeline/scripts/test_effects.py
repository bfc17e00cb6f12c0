"""Code a kernel script runs besides defining, generated into every script of kernels/: each edit moves every key
of the edited script (which then counts the whole script and every file beside it) and no key of another script
(each script imports its helpers afresh, so one script's table function cannot reach another's kernels)."""

from __future__ import annotations

import ast
import re
import shutil

import pytest

pytest.importorskip("triton")

from tritonforge.pipeline.builds.dist import discover_scripts, kernel_key  # noqa: E402
from tritonforge.pipeline.compile.targets import parse_target  # noqa: E402
from tritonforge.pipeline.scripts.effects import unseen  # noqa: E402
from tritonforge.pipeline.scripts.table import load_table  # noqa: E402

from ...conftest import ROOT  # noqa: E402

HELPER = "_edit_helper"  # a helper file beside every copy, edited or not
# (what goes at the top level, what goes first in get_function_table(), what goes first in the first jit function)
TL = "import triton.language as _edit_tl"  # a script may name Triton's language otherwise, or not at all
# (what goes at the top level, what goes first in get_function_table(), what goes first in the first jit function)
EDITS = {
    "a helper module's attribute set by the table function": ("import {helper}", "{helper}.LOWEST = -1e30", ""),
    "a list constexpr changed in place": (f"{TL}\nEDIT_GAIN = _edit_tl.constexpr([1.0, 2.0])",
                                          "EDIT_GAIN.value[0] = 2.0", ""),
    "globals() given a non-scalar": (TL, "globals()['EDIT_ACC'] = _edit_tl.float16", ""),
    "a jit function reading sys.modules": ("import sys\nEDIT_GAIN = 1.0", "",
                                           "edit_gain = sys.modules[__name__].EDIT_GAIN"),
    "a helper loaded by importlib": (f"import importlib\n_edit = importlib.import_module('{HELPER}')", "", ""),
    "setattr on Triton's language": (TL, "setattr(_edit_tl, 'edit_dtype', _edit_tl.float16)", ""),
    "exec": ("", "exec('EDIT = 4')", ""),
    "a module list appended to": ("EDIT_LIST = []", "EDIT_LIST.append(1)", ""),
    "an alias of a constexpr list changed": (f"{TL}\nEDIT_GAIN = _edit_tl.constexpr([1.0])",
                                             "g = EDIT_GAIN.value\ng[0] = 3.0", ""),
    "the environment set": ("import os", "os.environ['TRITONFORGE_EDIT'] = '1'", ""),
    "a call whose effects are not read": ("import os", "os.putenv('TRITONFORGE_EDIT', '1')", ""),
}
SCRIPTS = [p.relative_to(ROOT / "kernels").as_posix() for p in discover_scripts(ROOT / "kernels")]


def _indent(code: str, by: str) -> str:
    return "".join(f"{by}{line}\n" for line in code.splitlines())


def edited(text: str, top: str, table: str, jit: str, helper: str) -> str:
    """`text` with `top` after its imports, `table` first in get_function_table() and `jit` first in its first jit
    function."""
    if table:
        m = re.search(r"^def get_function_table\(\):\n", text, re.M)
        text = text[:m.end()] + _indent(table.format(helper=helper), "    ") + text[m.end():]
    if jit:
        fn = next((n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)
                   and any("jit" in ast.unparse(d) for d in n.decorator_list)), None)
        if fn is None:  # a script whose kernels are a helper's: a jit function of its own
            return edited(text + "\n\nimport triton\n\n\n@triton.jit\ndef _edit_jit():\n    pass\n", top, table, jit,
                          helper)
        lines = text.splitlines(keepends=True)
        first = fn.body[0].lineno - 1
        indent = lines[first][:len(lines[first]) - len(lines[first].lstrip())]
        text = "".join(lines[:first]) + _indent(jit, indent) + "".join(lines[first:])
    if top:
        imports = list(re.finditer(r"^(?:import|from) [^\n]+\n", text, re.M))
        at = imports[-1].end() if imports else 0
        text = text[:at] + top.format(helper=helper) + "\n" + text[at:]
    return text


def _keys(kernels, script: str) -> dict[str, str]:
    target = parse_target("sm_90")
    return {k.name: kernel_key(k, target, "3.9.0") for k in load_table([kernels / script]).kernels}


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """A copy of kernels/ with the helper beside the scripts, and each script's keys there."""
    base = tmp_path_factory.mktemp("kernels")
    shutil.copytree(ROOT / "kernels", base, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    for d in {(base / s).parent for s in SCRIPTS}:
        (d / f"{HELPER}.py").write_text("LOWEST = -3e38\n")
    return base, {s: _keys(base, s) for s in SCRIPTS}


# The default run gives each script three of the edits, in turn, so that every edit meets several scripts; the
# `full` run gives every script every edit.
ROTATION = 3


@pytest.mark.parametrize("script, edits", [
    *((s, [list(EDITS)[(i * ROTATION + j) % len(EDITS)] for j in range(ROTATION)]) for i, s in enumerate(SCRIPTS)),
    *(pytest.param(s, list(EDITS), marks=pytest.mark.full, id=f"{s}-every-edit") for s in SCRIPTS)])
def test_generated_edits_move_every_key_of_the_script(copies, tmp_path, script, edits):
    base, before = copies
    work = tmp_path / "kernels"
    shutil.copytree(base, work)
    text = (base / script).read_text()
    own = re.search(r"^from (_\w+) import", text, re.M)  # the script's own helper, if any
    helper = own.group(1) if own else HELPER
    helpers = [p for p in (work / script).parent.glob("_*.py")]
    for why in edits:
        top, table, jit = EDITS[why]
        (work / script).write_text(edited(text, top, table, jit, helper))
        assert unseen(work / script, helpers), (script, why)
        after = _keys(work, script)
        assert set(after) == set(before[script]), (script, why)
        still = [n for n in after if after[n] == before[script][n]]
        assert not still, (script, why, still[:3])
    # a script beside it that shares the helper the edit set keeps every key: it imports the helper afresh
    (work / script).write_text(edited(text, *EDITS["a helper module's attribute set by the table function"], helper))
    sharing = [s for s in SCRIPTS if s != script and (work / s).parent == (work / script).parent
               and re.search(rf"^from {helper} import", (work / s).read_text(), re.M)]
    for other in sharing[:1]:
        load_table([work / script, work / other])  # in one process, the edited script first
        assert _keys(work, other) == before[other], (script, other)


def test_an_unchanged_kernels_directory_keeps_its_keys_from_load_to_load(copies):
    """What a whole-profile build of unchanged scripts needs to find every kernel in the cache: the same keys."""
    base, before = copies
    assert {s: _keys(base, s) for s in SCRIPTS} == before


DEFINES = {  # what tables do in kernels/ and in the tests' small set: no effect
    "a table built in the function's own list":
        "def get_function_table():\n    t = []\n    t.append(1)\n    return t\n",
    "a dict of its own filled by key": "def c():\n    out = {}\n    out['g'] = {'params': []}\n    return out\n",
    "setdefault on its own dict":
        "def f(rows):\n    g = {}\n    for r in rows:\n        g.setdefault(r, []).append(r)\n",
    "a wrapper of the table (kernel_subset's footer)":
        "def get_function_table():\n    return []\n\n\n"
        "get_function_table = (lambda full: lambda: full())(get_function_table)\n",
    "string formatting and builtins":
        "SIG = '*{t}'\n\n\ndef f():\n    return [SIG.format(t=d) for d in sorted({'a'})]\n",
    "Triton's helpers":
        "import triton\nimport triton.language as tl\nB = tl.constexpr(4)\nN = triton.cdiv(10, 4)\n",
    "the standard library's pure parts": "import math\nW = int(math.log2(64))\n",
}
EFFECTS = {  # each is said, with its line
    "from sys import modules": "from sys import modules\nX = modules\n",
    "sys under another name": "import sys as s\nX = s.modules['a']\n",
    "a decorator the rules cannot read": "import functools\nimport atexit\n\n\n@atexit.register\ndef f():\n    pass\n",
    "a store through self": "class K:\n    def __init__(self):\n        self.x = 1\n",
    "a parameter's item set": "def f(d):\n    d['x'] = 1\n",
    "vars()": "X = vars()\n",
    "__dict__": "import math\nmath.__dict__['pi'] = 3\n",
    "a local bound to another module's function, called": "import os\n\n\ndef f():\n    g = os.system\n    g('true')\n",
}


@pytest.mark.parametrize("why", list(DEFINES))
def test_what_only_defines_is_no_effect(tmp_path, why):
    (tmp_path / "k_triton.py").write_text(DEFINES[why])
    assert unseen(tmp_path / "k_triton.py") == [], why


@pytest.mark.parametrize("why", list(EFFECTS))
def test_what_may_change_a_kernel_unseen_is_said_with_its_line(tmp_path, why):
    (tmp_path / "k_triton.py").write_text(EFFECTS[why])
    said = unseen(tmp_path / "k_triton.py")
    assert said and all(re.match(r"k_triton\.py:line \d+: ", s) for s in said), (why, said)


def test_a_helpers_global_rebinding_is_an_effect_of_the_script_that_imports_it(tmp_path):
    (tmp_path / "_h.py").write_text("GAIN = 1.0\n\n\ndef set_gain(g):\n    global GAIN\n    GAIN = g\n")
    (tmp_path / "k_triton.py").write_text("from _h import set_gain\n\n\ndef get_function_table():\n    set_gain(2.0)\n")
    said = unseen(tmp_path / "k_triton.py", [tmp_path / "_h.py"])
    assert said and said[0].startswith("_h.py:line 5: "), said
