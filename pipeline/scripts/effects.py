"""What a kernel script does besides defining what its kernels reach: the code whose effects a reachability walk
(sources.py) cannot see.

The compile-cache key of a kernel counts the part of its script the jit function reaches and the values it reads.
That is sound only while the script's other code defines things and does nothing else. A table function that sets
an attribute of a helper module, mutates a constexpr list in place, writes through `globals()`, or a jit function
that finds a constant through `sys.modules` or a helper loaded by `importlib`, changes the compiled binary from
code the walk leaves out. `unseen(path)` finds such code in a script and in every helper file beside it that it
imports; where it finds any, the key takes the whole script and every file beside it instead.

What counts as unseen, anywhere outside a jit function's body (Triton compiles those; they cannot run Python):
- a store to an attribute or an item (`m.X = ...`, `L[0] = ...`, `del d[k]`), or a call of a mutating method
  (`append`, `update`, `setdefault`, ...), on anything but a container the same function made itself;
- reflection and dynamic code (`globals`, `vars`, `setattr`, `delattr`, `exec`, `eval`, `compile`, `__import__`,
  `importlib`, `sys.modules`, `__dict__`), and reading files (`open`): anywhere, jit bodies included;
- a `global` statement in a helper file;
- a call of anything but a builtin without effects, a function of the script or of a helper beside it (whose code
  is read with the same rules), a parameter or lambda of the script's own, a method that only reads, or Triton's
  language and launch helpers.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
from pathlib import Path

REFLECTION = {"globals", "vars", "setattr", "delattr", "exec", "eval", "compile", "__import__", "open", "importlib",
              "__builtins__", "breakpoint", "input"}
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "setdefault", "add",
            "discard", "sort", "reverse", "__setitem__", "__delitem__", "__setattr__", "__delattr__", "__iadd__",
            "__imul__", "__ior__", "intersection_update", "difference_update", "symmetric_difference_update",
            "fill", "fill_", "copy_", "put", "itemset", "resize", "write", "writelines", "send", "throw"}
READERS = {"format", "format_map", "join", "replace", "split", "rsplit", "splitlines", "strip", "lstrip", "rstrip",
           "startswith", "endswith", "lower", "upper", "title", "capitalize", "zfill", "ljust", "rjust", "center",
           "partition", "rpartition", "find", "rfind", "index", "count", "items", "keys", "values", "get", "copy",
           "isdigit", "isalpha", "isalnum", "isidentifier", "encode", "decode", "bit_length", "is_integer",
           "removeprefix", "removesuffix", "casefold", "swapcase", "expandtabs", "hex", "conjugate"}
PURE_BUILTINS = {"len", "range", "int", "float", "str", "bool", "dict", "list", "tuple", "set", "frozenset", "sorted",
                 "reversed", "enumerate", "zip", "min", "max", "abs", "any", "all", "sum", "round", "repr",
                 "isinstance", "issubclass", "getattr", "hasattr", "iter", "next", "map", "filter", "print", "id",
                 "hash", "divmod", "pow", "format", "ord", "chr", "hex", "bin", "oct", "callable", "type", "slice",
                 "bytes", "complex", "staticmethod", "classmethod", "property", "super", "object"}
# the pure parts of the standard library a table may compute with
PURE_MODULES = {"math", "itertools", "operator", "functools", "string", "os.path", "dataclasses", "typing",
                "enum", "collections"}
TRITON = {"triton", "triton.language", "tl"}
FRESH = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
_EXCEPTIONS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}


def _is_jit(fn: ast.AST) -> bool:
    return isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        "jit" in ast.unparse(d) or "autotune" in ast.unparse(d) or "heuristics" in ast.unparse(d)
        for d in fn.decorator_list)


def _root(node: ast.AST) -> ast.AST:
    """The name an attribute, item or call chain starts from (`a` of `a.b[0].c()`)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _own_nodes(fn: ast.AST):
    """Every node of a function's own scope: its body, not the bodies of the functions and lambdas inside it."""
    todo = list(fn.body if isinstance(fn.body, list) else [fn.body])
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _locals(fn: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """(the names a function binds only to containers it makes itself, as `out = {}`; the names it binds only to
    functions of its own; every name it binds)."""
    fresh, callable_, other = set(), set(), set()
    for node in _own_nodes(fn):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            callable_.add(node.name)
            continue
        targets, value = [], None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.AugAssign):
            targets = [node.target]
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, ast.withitem):
            targets = [node.optional_vars]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            other.update(a.asname or a.name.split(".")[0] for a in node.names)
        for t in targets:
            if isinstance(t, ast.Name):
                made = isinstance(value, FRESH) or (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                                                    and value.func.id in ("dict", "list", "set"))
                (fresh if made else callable_ if isinstance(value, ast.Lambda) else other).add(t.id)
            elif isinstance(t, (ast.Tuple, ast.List, ast.Starred)):  # unpacking binds its names; `x[k] =` binds none
                other.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return fresh - other - callable_, callable_ - other - fresh, fresh | callable_ | other


@dataclasses.dataclass
class _Scope:
    fresh: set[str]  # bound only to containers the function made
    callable: set[str]  # parameters, and names bound only to the function's own defs and lambdas
    bound: set[str]  # every name the function binds


class _Reader(ast.NodeVisitor):
    """One file's unseen effects: `found` holds "line N: what" for each."""

    def __init__(self, tree: ast.Module, local: set[str], helper: bool):
        self.found: list[str] = []
        self.helper = helper
        self.defined = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                     ast.ClassDef))}
        self.defined |= {t.id for s in tree.body if isinstance(s, ast.Assign) and isinstance(s.value, ast.Lambda)
                         for t in s.targets if isinstance(t, ast.Name)}
        self.modules: dict[str, str] = {}  # local name -> module it names
        self.local_names: set[str] = set()  # names imported from a helper file beside the script
        for s in ast.walk(tree):
            if isinstance(s, ast.Import):
                for a in s.names:
                    self.modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(s, ast.ImportFrom) and s.module:
                if s.module == "sys" and any(a.name == "modules" for a in s.names):
                    self.say(s, "'sys.modules'")
                for a in s.names:
                    if s.module.split(".")[0] in local:
                        self.local_names.add(a.asname or a.name)
                    elif f"{s.module}.{a.name}" in PURE_MODULES | TRITON or s.module in PURE_MODULES | TRITON:
                        self.modules.setdefault(a.asname or a.name, f"{s.module}.{a.name}")
        self.local = local
        self.scopes: list[_Scope] = []  # the functions the reader is inside, innermost last

    def say(self, node: ast.AST, what: str) -> None:
        self.found.append(f"line {node.lineno}: {what} ({ast.unparse(node)[:80]})")

    # -- scopes ------------------------------------------------------------------------------------
    def _function(self, node) -> None:
        for d in getattr(node, "decorator_list", ()):  # each is called with the function
            if not isinstance(d, ast.Call):
                self._call_of(d, d)
            self.visit(d)
        args = node.args
        params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
        for default in (*args.defaults, *args.kw_defaults):
            if default is not None:
                self.visit(default)
        if _is_jit(node):
            self._reflection_only(node)
            return
        fresh, functions, bound = _locals(node)
        self.scopes.append(_Scope(fresh, params | functions, params | bound))
        for stmt in (node.body if isinstance(node.body, list) else [node.body]):
            self.visit(stmt)
        self.scopes.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _reflection_only(self, node) -> None:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in REFLECTION:
                self.say(n, f"'{n.id}' in a jit function")
            elif isinstance(n, ast.Attribute) and (n.attr == "__dict__" or
                                                   (n.attr == "modules" and self._module(n.value) == "sys")):
                self.say(n, f"'{_dotted(n) or n.attr}' in a jit function")

    def _fresh(self, node: ast.AST) -> bool:
        root = _root(node)
        return isinstance(root, ast.Name) and bool(self.scopes) and root.id in self.scopes[-1].fresh

    def _bound_here(self, name: str) -> bool:
        return any(name in scope.bound for scope in self.scopes)

    def _callable_here(self, name: str) -> bool:
        """A parameter (the script passes its own functions) or a function of the enclosing scopes' own."""
        return any(name in scope.callable for scope in self.scopes)

    def _module(self, node: ast.AST) -> str:
        """The module a dotted name starts from, as imported (`tl.zeros` -> triton.language), else ""."""
        base = _dotted(node)
        return self.modules.get(base.split(".")[0], "") if base else ""

    # -- what the rules look for -------------------------------------------------------------------
    def visit_Global(self, node: ast.Global) -> None:
        if self.helper:
            self.say(node, "a helper's function rebinds its module's names")

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in REFLECTION and not self._bound_here(node.id):
            self.say(node, f"'{node.id}'")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "__dict__" or (node.attr == "modules" and self._module(node.value) == "sys"):
            self.say(node, f"'{_dotted(node) or node.attr}'")
        elif node.attr in MUTATORS and not self._fresh(node.value) and not isinstance(node.ctx, ast.Store):
            self.say(node, f"'{node.attr}' of something this code did not make")
        self.generic_visit(node)

    def _stores(self, targets, node) -> None:
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)) \
                        and not self._fresh(n.value):
                    self.say(node, "a store to an attribute or item of something this code did not make")
                    return

    def _store(self, node) -> None:
        """An assignment, deletion or for loop: what it stores into."""
        self._stores(getattr(node, "targets", None) or [node.target], node)
        self.generic_visit(node)

    visit_Assign = visit_AugAssign = visit_AnnAssign = visit_Delete = visit_For = _store

    def visit_Call(self, node: ast.Call) -> None:
        self._call_of(node.func, node)
        self.generic_visit(node)

    def _call_of(self, func: ast.AST, node: ast.AST) -> None:
        """Say a call (or a decorator) whose effects the rules cannot vouch for."""
        if isinstance(func, ast.Lambda):
            return  # its body is read with these rules
        if isinstance(func, ast.Name):
            name = func.id
            if (name in PURE_BUILTINS or name in _EXCEPTIONS or name in self.defined or name in self.local_names
                    or self._callable_here(name) or self.modules.get(name, "").split(".")[0] in TRITON
                    or self.modules.get(name, "") in PURE_MODULES):
                return
            self.say(node, f"a call of '{name}', whose effects are not read")
            return
        if isinstance(func, ast.Attribute):
            if func.attr in READERS or (func.attr in MUTATORS and self._fresh(func.value)):
                return  # a method that only reads, or one that changes a container this code made
            base = _dotted(func.value)
            module = self.modules.get(base.split(".")[0], "") if base else ""
            if base and (base.split(".")[0] in self.local or module.split(".")[0] in TRITON
                         or base.split(".")[0] in TRITON or module in PURE_MODULES or base in PURE_MODULES
                         or f"{module}.{base.partition('.')[2]}".strip(".") in PURE_MODULES):
                return  # a helper's function (read with these rules), Triton's, or the standard library's pure ones
            if func.attr in MUTATORS:
                return  # said by visit_Attribute
            self.say(node, f"a call of '{ast.unparse(func)[:60]}', whose effects are not read")
            return
        self.say(node, "a call of a computed function, whose effects are not read")


def unseen(path: Path, helpers: list[Path] = ()) -> list[str]:
    """Every place in the script `path` and its helper files (`helpers`, beside it) whose effects the key's
    walk cannot see, as "file:line N: what"; empty when the script only defines."""
    local = {Path(h).stem for h in helpers} | {p.stem for p in Path(path).resolve().parent.glob("*.py")}
    found = []
    for f in [Path(path), *helpers]:
        try:
            tree = ast.parse(Path(f).read_text(), filename=str(f))
        except SyntaxError:
            continue  # loading the script reports it
        reader = _Reader(tree, local, helper=Path(f) != Path(path))
        reader.visit(tree)
        found += [f"{Path(f).name}:{what}" for what in reader.found]
    return found
