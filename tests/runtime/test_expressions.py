"""Launch-contract expressions: what evaluates, and what never parses (runtime/expressions.py)."""

import pytest
from tritonforge.runtime.expressions import evaluate, parse_expr


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
