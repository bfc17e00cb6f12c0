import pytest

from pipeline.contracts import evaluate, parse_expr, validate_contract
from pipeline.errors import PipelineError


def test_evaluate():
    env = {"batch": 10, "n_cols": 100, "BLOCK_SIZE": 128, "ROWS": 4}
    assert evaluate("n_cols <= BLOCK_SIZE", env) == 1
    assert evaluate("cdiv(batch, ROWS)", env) == 3
    assert evaluate("max(1, min(batch, 2)) * 3 - 1", env) == 5
    assert evaluate("n_cols > BLOCK_SIZE or batch % 2 == 0", env) == 1
    assert evaluate("not batch < 5 < 20", env) == 1
    with pytest.raises(KeyError, match="needs 'missing'"):
        evaluate("missing + 1", env)


@pytest.mark.parametrize("expr", ["__import__('os')", "x.y", "1.5 + x", "f(x)", "x ** 2", "[x]"])
def test_rejects_anything_but_arithmetic(expr):
    with pytest.raises(ValueError):
        parse_expr(expr)


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
