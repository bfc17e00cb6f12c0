"""Launch contracts: how a runtime launches every kernel of a group without guessing.

A kernel script may export `get_launch_contracts()` -> {group: contract}. A contract is data:

    {"params": ["out", "in", "in_stride", "out_stride", "n_cols"],   # role of each runtime argument
     "grid": ["batch", "1", "1"],                                    # expressions for grid x, y, z
     "requires": ["n_cols <= BLOCK_SIZE"]}                           # when a candidate may run

Cooperative kernels (programs that wait for one another) add `"cooperative": true`, which asks
the runtime for a cooperative launch (every program resident at once), and may use `resident`, the
number of programs of that kernel the device holds at once, in grid and requires. A contract may
also ask for `"workspace": "<bytes expression>"`: a zeroed device buffer passed in the parameter
whose role is `ws`, which the kernels must leave zeroed when they finish. Kernels whose programs
share data through distributed shared memory add `"cluster": [x, y, z]`, the thread-block cluster
each launch is made of (expressions like the grid's; each must divide the grid's, at most 8
programs in all): a CUDA sm_90+ launch attribute that ORT's launcher does not set.

Expressions use integers, the kernel's constants, `num_warps`, problem variables (any other name,
e.g. `batch`), + - * // %, comparisons, `and`/`or`/`not`, and cdiv/min/max. ORT's own scripts carry
no contracts; their groups are recorded with `null`.
"""

from __future__ import annotations

import ast

from .errors import PipelineError

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


def validate_contract(group: str, contract, n_runtime_params: int, constant_names: set[str],
                      script: str) -> dict:
    """Check a contract's shape and expressions; return it normalised (problem variables listed)."""
    def fail(msg):
        raise PipelineError(f"launch contract of group '{group}': {msg}", script=script)

    if not isinstance(contract, dict):
        fail("must be a dict")
    unknown = set(contract) - {"params", "grid", "requires", "doc", "workspace", "cooperative", "cluster"}
    if unknown:
        fail(f"unknown keys {sorted(unknown)}")
    params = contract.get("params")
    if not isinstance(params, list) or not all(isinstance(p, str) and p.isidentifier() for p in params):
        fail("'params' must be a list of identifiers, one per runtime argument")
    if len(params) != n_runtime_params:
        fail(f"'params' names {len(params)} arguments but the kernels take {n_runtime_params}")
    grid = contract.get("grid")
    if not isinstance(grid, list) or len(grid) != 3:
        fail("'grid' must be a list of three expressions")
    requires = contract.get("requires", [])
    if not isinstance(requires, list):
        fail("'requires' must be a list of expressions")
    cooperative = contract.get("cooperative", False)
    if not isinstance(cooperative, bool):
        fail("'cooperative' must be true or false")
    cluster = contract.get("cluster")
    if cluster is not None:
        if not isinstance(cluster, list) or len(cluster) != 3:
            fail("'cluster' must be a list of three expressions")
        if cooperative:
            fail("a kernel is either cooperative or launched in clusters, not both")
    workspace = contract.get("workspace")
    if workspace is not None and "ws" not in params:
        fail("'workspace' needs a parameter with the role 'ws'")
    if "ws" in params and workspace is None:
        fail("a parameter with the role 'ws' needs a 'workspace' size expression")
    problem = set()
    for expr in [*grid, *requires, *(cluster or []), *([workspace] if workspace is not None else [])]:
        try:
            _, names = parse_expr(str(expr) if isinstance(expr, int) else expr)
        except ValueError as exc:
            fail(str(exc))
        problem |= names - constant_names - {"num_warps"}
    if "resident" in problem and not cooperative:
        fail("'resident' only means something for cooperative kernels")
    return {
        "params": list(params),
        "grid": [str(g) for g in grid],
        "requires": list(requires),
        "problem": sorted(problem),
        **({"doc": str(contract["doc"])} if "doc" in contract else {}),
        **({"workspace": str(workspace)} if workspace is not None else {}),
        **({"cooperative": True} if cooperative else {}),
        **({"cluster": [str(d) for d in cluster]} if cluster is not None else {}),
    }
