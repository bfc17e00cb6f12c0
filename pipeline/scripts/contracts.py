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
each launch is made of (expressions like the grid's; each must divide the grid's; more than 8
programs only where the device allows non-portable sizes): a CUDA sm_90+ launch attribute that ORT's
launcher does not set. A group whose kernels exist for correctness on every shape, not for speed, says
`"fallback": true`: a runtime tries it after every other group.

Expressions (runtime/expressions.py) use integers, the kernel's constants, `num_warps`, problem
variables (any other name, e.g. `batch`), + - * // %, comparisons, `and`/`or`/`not`, and
cdiv/min/max. ORT's own scripts carry no contracts; their groups are recorded with `null`.
"""

from __future__ import annotations

from tritonforge.pipeline.errors import PipelineError
from tritonforge.runtime.expressions import parse_expr


def validate_contract(group: str, contract, n_runtime_params: int, constant_names: set[str],
                      script: str) -> dict:
    """Check a contract's shape and expressions; return it normalised (problem variables listed)."""
    def fail(msg):
        raise PipelineError(f"launch contract of group '{group}': {msg}", script=script)

    if not isinstance(contract, dict):
        fail("must be a dict")
    unknown = set(contract) - {"params", "grid", "requires", "doc", "workspace", "cooperative", "cluster", "fallback"}
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
    fallback = contract.get("fallback", False)
    if not isinstance(fallback, bool):
        fail("'fallback' must be true or false")
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
        **({"fallback": True} if fallback else {}),
        **({"cluster": [str(d) for d in cluster]} if cluster is not None else {}),
    }
