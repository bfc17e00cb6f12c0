"""Build profiles: `ort` holds exactly the groups ORT's ops look up, `full` every group; where each goes."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.scripts.profiles import in_profile, parse_profiles, root, select, store_prefix
from tritonforge.pipeline.scripts.table import load_table


def test_the_ort_profile_is_orts_groups(small_scripts):
    table = load_table(small_scripts)
    ort = select(table, "ort")
    assert {k.group for k in ort.kernels} == {g for g in {k.group for k in table.kernels} if in_profile(g, "ort")}
    assert {k.group for k in ort.kernels} >= {"softmax_fp16", "GroupNormTriton_Silu_fp16", "GroupNormTriton_Pass_fp32"}
    assert not any(k.group.startswith(("GroupNormSplit", "softmax_rows", "log_softmax")) for k in ort.kernels)
    assert set(ort.contracts) == {k.group for k in ort.kernels}
    assert select(table, "full").kernels == table.kernels


def test_where_each_profile_goes_and_bad_names():
    assert root("dist", "ort") == Path("dist") and root("dist", "full") == Path("dist/full")
    assert store_prefix("ort") == "" and store_prefix("full") == "full/"
    assert parse_profiles("ort, full,ort") == ["ort", "full"]
    with pytest.raises(PipelineError, match="--profile must be one of ort, full, not 'fast'"):
        parse_profiles("ort,fast")
    with pytest.raises(PipelineError, match="--profile must name one of"):
        parse_profiles(" , ")
