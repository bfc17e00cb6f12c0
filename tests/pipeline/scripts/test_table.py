"""Loading kernel scripts as ORT does: helpers beside them, each directory's own."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("triton")

from tritonforge.pipeline.errors import PipelineError  # noqa: E402
from tritonforge.pipeline.scripts.table import load_table  # noqa: E402

SCRIPT = """import triton
import triton.language as tl
from _helper_for_test import one

WHICH = {which}


@triton.jit
def k(out_ptr, WHICH: tl.constexpr):
    tl.store(out_ptr, one() + WHICH)


def get_function_table():
    return [{{"name": "k", "group": "g", "func": k, "sig": "*i32",
              "kwargs": {{"num_warps": 1, "constants": {{"WHICH": WHICH}}}}}}]
"""


def write(d, which: int, helper: str = "one"):
    d.mkdir()
    (d / "_helper_for_test.py").write_text(f"import triton\n\n\n@triton.jit\ndef {helper}():\n    return 1\n")
    (d / "k_triton.py").write_text(SCRIPT.format(which=which))
    return d / "k_triton.py"


def test_scripts_import_helpers_next_to_them(tmp_path):
    """A helper is imported as a sibling, as `python script.py` would; sys.path is restored."""
    before = list(sys.path)
    assert [k.name for k in load_table([write(tmp_path / "a", 1)]).kernels] == ["k"]
    assert sys.path == before


def test_each_directory_gets_its_own_helpers(tmp_path):
    """Two kernel directories with a helper of the same name, loaded in one process: each script imports
    the helper beside it, not the one loaded first."""
    assert [k.constants["WHICH"] for k in load_table([write(tmp_path / "a", 1)]).kernels] == [1]
    with pytest.raises(PipelineError, match="cannot import name 'one'"):  # b's helper has no one()
        load_table([write(tmp_path / "b", 2, helper="two")])
    assert [k.constants["WHICH"] for k in load_table([write(tmp_path / "c", 3)]).kernels] == [3]
    assert sys.modules["_helper_for_test"].__file__ == str(tmp_path / "c" / "_helper_for_test.py")
