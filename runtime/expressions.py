"""Launch-contract expressions: the integer arithmetic a kernel script writes for grids, `requires`,
clusters and workspaces (`cdiv(batch, ROWS)`, `n_cols <= BLOCK_SIZE`), parsed and evaluated safely.

Integers, names, + - * // %, comparisons, `and` / `or` / `not`, and cdiv / min / max; nothing else
parses. The build checks a script's expressions with `parse_expr`; a runtime evaluates them with
`evaluate`. Standard library only, so both sides can use it.
"""

from __future__ import annotations

import ast

_FUNCS = {"cdiv": lambda a, b: -(-a // b), "min": min, "max": max}
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b}
_CMPS = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
         ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


def _check(node: ast.AST, expr: str) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            if n.id not in _FUNCS:
                names.add(n.id)
        elif isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name) or n.func.id not in _FUNCS or n.keywords:
                raise ValueError(f"only cdiv/min/max may be called in '{expr}'")
        elif isinstance(n, ast.Constant):
            if type(n.value) is not int:
                raise ValueError(f"only integer literals are allowed in '{expr}'")
        elif not isinstance(n, (ast.Expression, ast.BinOp, ast.Compare, ast.BoolOp, ast.UnaryOp,
                                ast.Load, ast.And, ast.Or, ast.Not, ast.USub, *_BINOPS, *_CMPS)):
            raise ValueError(f"'{type(n).__name__}' is not allowed in '{expr}'")
    return names


def parse_expr(expr: str) -> tuple[ast.Expression, set[str]]:
    if not isinstance(expr, str):
        raise ValueError(f"expression must be a string, got {expr!r}")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"cannot parse '{expr}': {exc.msg}") from None
    return tree, _check(tree, expr)


def evaluate(expr: str, env: dict[str, int]) -> int:
    """Evaluate a contract expression; unknown names raise KeyError naming the variable."""
    tree, _ = parse_expr(expr)

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in env:
                raise KeyError(f"'{expr}' needs '{n.id}'")
            return env[n.id]
        if isinstance(n, ast.BinOp):
            return _BINOPS[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp):
            v = ev(n.operand)
            return -v if isinstance(n.op, ast.USub) else int(not v)
        if isinstance(n, ast.BoolOp):
            vals = [ev(v) for v in n.values]
            return int(all(vals) if isinstance(n.op, ast.And) else any(vals))
        if isinstance(n, ast.Compare):
            left = ev(n.left)
            for op, right in zip(n.ops, n.comparators):
                r = ev(right)
                if not _CMPS[type(op)](left, r):
                    return 0
                left = r
            return 1
        if isinstance(n, ast.Call):
            return _FUNCS[n.func.id](*[ev(a) for a in n.args])
        raise ValueError(f"cannot evaluate '{expr}'")

    return int(ev(tree))
