import pytest
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.scripts.contracts import validate_contract


def test_validate_contract():
    c = validate_contract("g", {"params": ["out", "in", "n"], "grid": ["cdiv(n, BLOCK)", 1, "1"],
                                "requires": ["n >= 1"]}, 3, {"BLOCK"}, "s.py")
    assert c["problem"] == ["n"] and c["grid"] == ["cdiv(n, BLOCK)", "1", "1"]
    with pytest.raises(PipelineError, match="s.py: launch contract of group 'g': 'params' names 2"):
        validate_contract("g", {"params": ["a", "b"], "grid": ["1", "1", "1"]}, 3, set(), "s.py")
    with pytest.raises(PipelineError, match="grid"):
        validate_contract("g", {"params": ["a"], "grid": ["1"]}, 1, set(), "s.py")


def test_cooperative_contract_with_workspace():
    spec = {"params": ["out", "ws", "n"], "grid": ["min(n, resident)", "1", "1"], "cooperative": True,
            "workspace": "4 * n * SPLIT"}
    c = validate_contract("g", spec, 3, {"SPLIT"}, "s.py")
    assert c["cooperative"] is True and c["workspace"] == "4 * n * SPLIT"
    assert c["problem"] == ["n", "resident"]
    with pytest.raises(PipelineError, match="'resident' only means something for cooperative"):
        validate_contract("g", {**spec, "cooperative": False}, 3, {"SPLIT"}, "s.py")
    with pytest.raises(PipelineError, match="needs a parameter with the role 'ws'"):
        validate_contract("g", {**spec, "params": ["out", "buf", "n"]}, 3, {"SPLIT"}, "s.py")
    with pytest.raises(PipelineError, match="needs a 'workspace' size"):
        validate_contract("g", {k: v for k, v in spec.items() if k != "workspace"}, 3, {"SPLIT"}, "s.py")
    with pytest.raises(PipelineError, match="'cooperative' must be true or false"):
        validate_contract("g", {**spec, "cooperative": "yes"}, 3, {"SPLIT"}, "s.py")


def test_cluster_contract():
    spec = {"params": ["out", "n"], "grid": ["n", "groups", "PARTS"], "cluster": ["1", 1, "PARTS"]}
    c = validate_contract("g", spec, 2, {"PARTS"}, "s.py")
    assert c["cluster"] == ["1", "1", "PARTS"] and c["problem"] == ["groups", "n"]
    assert "cooperative" not in c
    assert "cluster" not in validate_contract("g", {k: v for k, v in spec.items() if k != "cluster"}, 2, {"PARTS"},
                                              "s.py")
    with pytest.raises(PipelineError, match="'cluster' must be a list of three expressions"):
        validate_contract("g", {**spec, "cluster": "PARTS"}, 2, {"PARTS"}, "s.py")
    with pytest.raises(PipelineError, match="either cooperative or launched in clusters"):
        validate_contract("g", {**spec, "cooperative": True}, 2, {"PARTS"}, "s.py")
    with pytest.raises(PipelineError, match="s.py: launch contract of group 'g'"):
        validate_contract("g", {**spec, "cluster": ["1", "1", "PARTS ** 2"]}, 2, {"PARTS"}, "s.py")


def test_fallback_flag():
    base = {"params": ["out", "in", "n_cols"], "grid": ["batch", "1", "1"], "requires": ["n_cols >= 1"]}
    assert validate_contract("g", {**base, "fallback": True}, 3, set(), "s.py")["fallback"] is True
    assert "fallback" not in validate_contract("g", base, 3, set(), "s.py")
    with pytest.raises(PipelineError, match="'fallback' must be true or false"):
        validate_contract("g", {**base, "fallback": "yes"}, 3, set(), "s.py")
