"""What a kernel's compiled code can depend on, read from the files: the part of its script that its jit
function reaches, every helper file beside the script that the script imports, and the values the reached code
reads as the script left them.

The function table, the launch contracts and any other code the kernel cannot reach are left out, so
adding a tuning variant or a kernel to a script, or cutting its table down, leaves the compile-cache keys of
the script's other kernels as they were: only what changed is compiled again. That holds only for a script
that does nothing but define: where it (or a helper beside it) does more than the walk can follow (effects.py:
stores into other objects, `globals()`, `setattr`, `exec`, `importlib`, `sys.modules`, calls it cannot read),
a kernel's key counts the whole script and every file beside it instead.

Read from the files, never from loaded modules: Triton's own JIT cache key depends on the order in which
modules were loaded in this process, so the same inputs could get two keys.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from .effects import unseen

# Values a jit function can read from its module at compile time, recorded as they are after the script
# ran (a table function may rebind them).
_SCALARS = (bool, int, float, str, type(None))
_DEPTH = 6  # how deep a recorded value's containers are followed


def every_local_file(path: Path) -> dict[str, str]:
    """{path relative to the script's directory: sha256} of every file under it (the script and anything it
    could load or read), caches and hidden files aside."""
    here = Path(path).resolve().parent
    found = {}
    for f in sorted(here.rglob("*")):
        rel = f.relative_to(here)
        if f.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
            found[rel.as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    return found


def local_sources(path: Path) -> dict[str, str]:
    """{file name: sha256} of a script and of every file beside it that it imports, transitively."""
    here = Path(path).resolve().parent
    found: dict[str, str] = {}
    todo = [Path(path).resolve()]
    while todo:
        f = todo.pop()
        if f.name in found:
            continue
        data = f.read_bytes()
        found[f.name] = hashlib.sha256(data).hexdigest()
        try:
            tree = ast.parse(data, filename=str(f))
        except SyntaxError:
            continue  # loading the script reports it
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                sibling = here / f"{name.split('.')[0]}.py"
                if sibling.is_file():
                    todo.append(sibling)
    return dict(sorted(found.items()))


def _bound(stmt: ast.stmt) -> set[str] | None:
    """The module names a top-level statement binds and does nothing else; None for any other statement
    (imports, calls, if/for/with/try blocks, attribute or item assignments), which is always kept."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return set()  # a docstring: no code
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        has_global = any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(stmt))
        return None if has_global else {stmt.name}
    targets = (stmt.targets if isinstance(stmt, ast.Assign)
               else [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else None)
    if targets is None:
        return None
    names = set()
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                return None
            if isinstance(node, ast.Name):
                names.add(node.id)
    return names


def _names(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}


class ScriptSource:
    """A script's top-level statements, which of them one of its jit functions can reach, and where the script or
    its helpers (`sources`: local_sources' file names) do more than define (`unseen`, effects.py)."""

    def __init__(self, path: Path, sources: dict[str, str] | None = None):
        self.path = Path(path).resolve()
        helpers = [self.path.parent / name for name in (sources or {}) if name != self.path.name]
        self.unseen = unseen(self.path, helpers)
        text = self.path.read_text()
        self.lines = text.splitlines(keepends=True)
        self.body = ast.parse(text, filename=str(path)).body
        self.binds: dict[str, list[int]] = {}
        self.always: list[int] = []
        for i, stmt in enumerate(self.body):
            names = _bound(stmt)
            if names is None:
                self.always.append(i)
            for name in names or ():
                self.binds.setdefault(name, []).append(i)

    def _segment(self, i: int) -> str:
        stmt = self.body[i]
        start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        return "".join(self.lines[start - 1:stmt.end_lineno])

    def reach(self, name: str | None) -> tuple[str, list[str]] | None:
        """(the text of every statement the top-level def `name` can reach, every name those statements
        read or bind); name None: the statements kept whatever the kernel (imports, calls, blocks). None when no
        plain top-level def binds `name` (the whole script counts then)."""
        if name is not None and not any(isinstance(self.body[i], (ast.FunctionDef, ast.AsyncFunctionDef))
                                        for i in self.binds.get(name, ())):
            return None
        keep = set(self.always)
        todo = [*([name] if name else []), *(n for i in self.always for n in _names(self.body[i]))]
        seen: set[str] = set()
        while todo:
            n = todo.pop()
            if n in seen:
                continue
            seen.add(n)
            for i in self.binds.get(n, ()):
                if i not in keep:
                    keep.add(i)
                    todo.extend(_names(self.body[i]))
        return "".join(self._segment(i) for i in sorted(keep)), sorted(seen)


def _value(value, kinds=_SCALARS) -> str | None:
    value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    return repr(value) if isinstance(value, kinds) else None


def _contents(value, here: Path, depth: int = 0):
    """What a non-scalar value a jit function can read holds, in a form that is the same in every process:
    containers item by item (a list a table function changed in place reads differently), Triton's dtypes by name,
    a helper module beside the script by its plain values; None for what holds no data (functions, classes, other
    modules), which the key reads as code instead."""
    import types

    value = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
    if isinstance(value, _SCALARS):
        return repr(value)
    if depth > _DEPTH:
        return "..."
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [_contents(v, here, depth + 1) for v in value]]
    if isinstance(value, (set, frozenset)):
        return ["set", sorted(json.dumps(_contents(v, here, depth + 1), sort_keys=True) for v in value)]
    if isinstance(value, dict):
        items = ([json.dumps(_contents(k, here, depth + 1), sort_keys=True), _contents(v, here, depth + 1)]
                 for k, v in value.items())
        return ["dict", sorted(items, key=lambda kv: kv[0])]
    if isinstance(value, types.ModuleType):
        where = getattr(value, "__file__", None)
        if not where or Path(where).resolve().parent != here:
            return None
        plain = {n: _contents(v, here, depth + 1) for n, v in vars(value).items()
                 if not n.startswith("__") and not callable(v) and not isinstance(v, types.ModuleType)}
        return {n: v for n, v in sorted(plain.items()) if v is not None}
    kind = type(value)
    if kind.__module__.startswith("triton") and kind.__name__ in ("dtype", "pointer_type", "block_type"):
        return f"{kind.__name__} {value}"
    return None


def _held(value, here: Path):
    """A non-scalar value's contents (_contents), or None for a scalar (`_value` records those) or what holds no
    data."""
    got = _contents(value, here)
    return None if isinstance(got, str) and _value(value) is not None else got


def kernel_source_key(func, script: ScriptSource, sources: dict[str, str]) -> str:
    """What a kernel's code depends on: its jit function (file and name), the part of its script that
    function reaches, the helper files the script imports, and the values of the module constants the
    function can read, as the script left them (its table function may rebind them, or change a list in place).
    A function from a helper file depends on the script's imports and top-level code only; one defined anywhere
    but at the top of a file (a factory's) on the whole script; any kernel of a script that does more than define
    (script.unseen) on the whole script and every file beside it."""
    fn = getattr(func, "fn", func)
    where = f"{Path(fn.__code__.co_filename).name}:{fn.__qualname__}"
    if script.unseen:
        return hashlib.sha256(json.dumps([where, every_local_file(script.path)], sort_keys=True).encode()).hexdigest()
    reached = None
    if "." not in fn.__qualname__:
        if Path(fn.__code__.co_filename).resolve() == script.path:
            reached = script.reach(fn.__qualname__)
        else:
            text, _ = script.reach(None)
            reached = text, sorted(n for n, v in fn.__globals__.items()
                                   if not n.startswith("__") and (_value(v, (bool, int, float)) is not None or
                                                                  _held(v, script.path.parent) is not None))
    if reached is None:
        mine = sources[script.path.name]
    else:
        text, names = reached
        values = {n: _value(fn.__globals__[n]) for n in names if n in fn.__globals__}
        held = {n: _held(fn.__globals__[n], script.path.parent) for n in names if n in fn.__globals__}
        held = {n: v for n, v in held.items() if v is not None}
        mine = hashlib.sha256(json.dumps([text, values, held] if held else [text, values],
                                         sort_keys=True).encode()).hexdigest()
    deps = {**sources, script.path.name: mine}
    return hashlib.sha256(json.dumps([where, deps], sort_keys=True).encode()).hexdigest()
