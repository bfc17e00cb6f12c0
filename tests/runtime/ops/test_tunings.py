"""An op is a declaration: a module in runtime/ops with a TUNING is found by the tuner, its shapes files
and ORT's export, with nothing else edited (CPU: no problem here is put on a GPU)."""

from __future__ import annotations

import sys

import pytest
from tritonforge.runtime import ops
from tritonforge.runtime.ort_tuning import ExportError, registered_groups
from tritonforge.runtime.tune import problems_for, read_shape_files

NEW_OP = '''
from dataclasses import dataclass

from tritonforge.runtime.ops import Tuning

@dataclass(frozen=True)
class RowScaleProblem:
    dtype: str
    rows: int
    cols: int
    twice: bool

TUNING = Tuning(family="row_scale", keys={"row_scale": {"twice": False}, "row_scale2": {"twice": True}},
                shape_fields=("rows", "cols"), default_shapes=lambda: [(4, 77), (16, 4096)],
                problem=lambda dtype, shape, twice: RowScaleProblem(dtype, *shape, twice),
                ort_groups={r"row_scale_(fp16|fp32)": lambda dt: [f"row_scale_{dt}"]})
'''


@pytest.fixture
def new_op(tmp_path, monkeypatch):
    (tmp_path / "row_scale.py").write_text(NEW_OP)
    monkeypatch.setattr(ops, "__path__", [*ops.__path__, str(tmp_path)])
    yield
    sys.modules.pop("tritonforge.runtime.ops.row_scale", None)


def test_the_shipped_ops_declare_their_tuning():
    families = {t.family: t for t in ops.tunings()}
    assert set(families) == {"softmax", "group_norm"}
    assert ops.tune_keys() == ["group_norm_silu", "group_norm_pass", "softmax", "log_softmax"]
    for t in families.values():
        shape = t.default_shapes()[0]
        assert len(shape) == len(t.shape_fields)
        for key, options in t.keys.items():
            p = t.problem("fp16", shape, **options)
            assert p.op_key == f"{key}_fp16" and p.bytes_moved > 0 and callable(p.setup)
    assert registered_groups("group_norm_silu_fp16") == ["GroupNormTriton_Pass_fp16", "GroupNormTriton_Silu_fp16"]
    assert registered_groups("softmax_bf16") == ["softmax_bf16"]
    with pytest.raises(ExportError, match="no Triton op for 'log_softmax_fp16'"):
        registered_groups("log_softmax_fp16")


def test_a_new_op_module_is_all_it_takes(new_op, tmp_path):
    assert "row_scale2" in ops.tune_keys()
    problems = problems_for(["row_scale2", "softmax"], ["fp32"], {"softmax": [(1, 8)]})
    assert [type(p).__name__ for p in problems] == ["RowScaleProblem", "RowScaleProblem", "SoftmaxProblem"]
    assert problems[0].twice and (problems[1].rows, problems[1].cols) == (16, 4096)
    shapes = tmp_path / "rows.txt"
    shapes.write_text("3,5\n")
    assert read_shape_files({"row_scale": str(shapes)}) == {"row_scale": [(3, 5)]}
    shapes.write_text("3,5,7\n")
    with pytest.raises(ValueError, match="expected 'rows,cols'"):
        read_shape_files({"row_scale": str(shapes)})
    assert registered_groups("row_scale_fp16") == ["row_scale_fp16"]
