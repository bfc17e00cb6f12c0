"""Load kernel scripts the way ORT's compile_triton.py does, and validate every function-table entry.

A script is executed as a plain file (`module_<i>`), then `get_function_table()` must return a list of
`{name, group, func, sig, kwargs}` dicts. Table order is kept: it becomes the archive, header and
TunableOp order. A script may say which platforms it builds for (`PLATFORMS = ("cuda",)` when its
kernels use inline PTX), and the lowest CUDA architecture its kernels run on (`MIN_SM = 90` for
thread-block clusters); its kernels are left out of other targets' artifacts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from tritonforge.pipeline.compile.targets import Target
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.scripts.abi import ParamType, parse_param_type
from tritonforge.pipeline.scripts.contracts import validate_contract
from tritonforge.pipeline.scripts.sources import ScriptSource, kernel_source_key, local_sources

ENTRY_KEYS = ("name", "group", "func", "sig", "kwargs")
PLATFORM_NAMES = ("cuda", "rocm")
NAME_RE = re.compile(r"[A-Za-z0-9_]+")
# kwargs forwarded to triton.compile as options; anything else is a typo we refuse.
OPTION_KEYS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
               "waves_per_eu", "matrix_instr_nonkdim", "kpack", "schedule_hint"}


@dataclass(frozen=True)
class KernelSpec:
    script: str  # path as given, for messages
    index: int  # position in the script's table
    name: str
    group: str
    func: object = field(repr=False, compare=False)
    params: tuple[ParamType, ...] = ()
    param_names: tuple[str, ...] = ()
    constants: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    platforms: tuple[str, ...] = PLATFORM_NAMES  # the script's PLATFORMS
    min_sm: int = 0  # the script's MIN_SM (CUDA targets only)
    max_sm: int | None = None  # the script's MAX_SM (CUDA targets only)
    source_key: str = ""  # what the kernel's code depends on (sources.kernel_source_key)

    def builds_for(self, target: Target) -> bool:
        if target.platform not in self.platforms:
            return False
        if target.platform != "cuda":
            return True
        return self.min_sm <= int(target.arch) and (self.max_sm is None or int(target.arch) <= self.max_sm)

    @property
    def num_warps(self) -> int:
        return self.options.get("num_warps", 4)

    def sig_string(self) -> str:
        return ",".join(str(p) for p in self.params)

    def check_target(self, target: Target) -> None:
        """Target-dependent rules: the block must fit and ORT launches exactly one CTA."""
        threads = target.warp_size * self.num_warps
        if threads > target.max_threads_per_block:
            raise PipelineError(
                f"num_warps={self.num_warps} gives {threads} threads per block, over the "
                f"{target.max_threads_per_block} allowed with warp size {target.warp_size}",
                script=self.script, kernel=self.name, target=target.arch_name)


@dataclass
class KernelTable:
    kernels: list[KernelSpec]
    contracts: dict[str, dict | None]  # group -> contract (None when the script declares none)
    scripts: list[str]


def load_module(path: Path, index: int):
    """Execute a kernel script as ORT does, under the module name `module_<index>`."""
    spec = importlib.util.spec_from_file_location(f"module_{index}", path)
    if spec is None or spec.loader is None:
        raise PipelineError("not a Python file", script=str(path))
    module = importlib.util.module_from_spec(spec)
    # Triton's JIT reads the function source through linecache/inspect, which needs sys.modules.
    sys.modules[spec.name] = module
    # As under `python script.py`, a script may import helpers that sit next to it (kernels/_*.py).
    here = str(Path(path).resolve().parent)
    _forget_siblings(Path(here))
    sys.path.insert(0, here)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(spec.name, None)
        raise PipelineError(f"import failed: {type(exc).__name__}: {exc}\n{_short_tb(exc)}",
                            script=str(path)) from None
    finally:
        sys.path.remove(here)
    return module


def _forget_siblings(here: Path) -> None:
    """Each script imports the helpers beside it afresh: a module named like a file beside the script (loaded
    for an earlier script, or from another kernels directory) must not stand in for that file, and what one
    script's table function did to a shared helper's state must not reach another script's kernels (their
    compile-cache keys do not count the first script's code)."""
    for sibling in here.glob("*.py"):
        sys.modules.pop(sibling.stem, None)


def _short_tb(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)[-2:]
    return "".join(traceback.format_list(frames)).rstrip()


def call_table(module, path: Path) -> list:
    fn = getattr(module, "get_function_table", None)
    if fn is None:
        hint = " (found the misspelt 'get_funcion_table')" if hasattr(module, "get_funcion_table") else ""
        raise PipelineError(f"defines no get_function_table(){hint}", script=str(path))
    try:
        table = fn()
    except Exception as exc:
        raise PipelineError(f"get_function_table() raised {type(exc).__name__}: {exc}",
                            script=str(path)) from None
    if not isinstance(table, (list, tuple)):
        raise PipelineError(f"get_function_table() returned {type(table).__name__}, expected a list",
                            script=str(path))
    return list(table)


def _is_jit(func) -> bool:
    return hasattr(func, "arg_names") and hasattr(func, "params") and hasattr(func, "cache_key")


def validate_entry(entry, path: Path, index: int) -> KernelSpec:
    script = str(path)
    if not isinstance(entry, dict):
        raise PipelineError(f"table entry {index} is a {type(entry).__name__}, expected a dict",
                            script=script)
    name = entry.get("name")
    label = name if isinstance(name, str) else f"#{index}"

    def fail(msg):
        raise PipelineError(msg, script=script, kernel=label)

    missing = [k for k in ENTRY_KEYS if k not in entry]
    extra = sorted(set(entry) - set(ENTRY_KEYS))
    if missing:
        fail(f"missing keys {missing} (an entry needs exactly {list(ENTRY_KEYS)})")
    if extra:
        fail(f"unknown keys {extra} (an entry needs exactly {list(ENTRY_KEYS)})")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        fail(f"name {name!r} must be made of [A-Za-z0-9_] only: it becomes the symbol "
             "_binary_<name>_<ext>_start and a file name")
    group = entry["group"]
    if not isinstance(group, str) or not NAME_RE.fullmatch(group):
        fail(f"group {group!r} must be a non-empty string of [A-Za-z0-9_]")
    func = entry["func"]
    if not _is_jit(func):
        fail(f"'func' is {type(func).__name__}, expected a @triton.jit function")

    # Runtime parameters first, constexprs after: ORT's sig covers only the runtime ones, in order.
    arg_names = list(func.arg_names)
    is_constexpr = [p.is_constexpr for p in func.params]
    runtime_names = [n for n, c in zip(arg_names, is_constexpr) if not c]
    constexpr_names = [n for n, c in zip(arg_names, is_constexpr) if c]
    if any(is_constexpr[i] and not is_constexpr[i + 1] for i in range(len(arg_names) - 1)):
        fail(f"constexpr parameters must come after all runtime parameters in {func.__name__}{tuple(arg_names)}")

    sig = entry["sig"]
    if not isinstance(sig, str):
        fail(f"sig must be a comma-separated string, got {type(sig).__name__}")
    items = [s for s in sig.split(",")] if sig.strip() else []
    try:
        params = tuple(parse_param_type(s) for s in items)
    except ValueError as exc:
        fail(f"sig '{sig}': {exc}")
    if len(params) != len(runtime_names):
        fail(f"sig '{sig}' has {len(params)} types but {func.__name__} has {len(runtime_names)} runtime "
             f"parameters {runtime_names}")

    kwargs = entry["kwargs"]
    if not isinstance(kwargs, dict):
        fail(f"kwargs must be a dict, got {type(kwargs).__name__}")
    unknown = sorted(set(kwargs) - OPTION_KEYS - {"constants"})
    if unknown:
        fail(f"unknown kwargs {unknown} (allowed: constants, {', '.join(sorted(OPTION_KEYS))})")
    if "constants" not in kwargs:
        fail("kwargs has no 'constants' (ORT's header writer needs it; use {} when there are none)")
    constants = kwargs["constants"]
    if not isinstance(constants, dict):
        fail(f"constants must be a dict, got {type(constants).__name__}")
    for k, v in constants.items():
        if type(v) is not int:  # bool and float would print as True / 0.5 in the C++ header
            fail(f"constant {k}={v!r} is a {type(v).__name__}; constants must be ints (use int(...))")
        if not -(2**31) <= v < 2**31:
            fail(f"constant {k}={v} does not fit the header's int")
    if set(constants) != set(constexpr_names):
        fail(f"constants {sorted(constants)} do not match the constexpr parameters {constexpr_names} "
             f"of {func.__name__}")
    options = {k: v for k, v in kwargs.items() if k != "constants"}
    warps = options.get("num_warps", 4)
    if type(warps) is not int or warps < 1 or warps & (warps - 1):
        fail(f"num_warps={warps!r} must be a power of two")
    options["num_warps"] = warps
    if options.get("num_ctas", 1) != 1:
        fail("num_ctas must be 1: ORT launches one CTA per program, with no clusters")
    stages = options.get("num_stages")
    if stages is not None and (type(stages) is not int or stages < 1):
        fail(f"num_stages={stages!r} must be a positive int")
    return KernelSpec(script, index, name, group, func, params, tuple(runtime_names),
                      dict(constants), options)


def script_platforms(module, path: Path) -> tuple[str, ...]:
    """The platforms a script builds for: its PLATFORMS (e.g. ("cuda",) for inline PTX), else all."""
    declared = getattr(module, "PLATFORMS", None)
    if declared is None:
        return PLATFORM_NAMES
    if (not isinstance(declared, (tuple, list)) or not declared
            or any(p not in PLATFORM_NAMES for p in declared)):
        raise PipelineError(f"PLATFORMS must be a non-empty tuple drawn from {PLATFORM_NAMES}, got {declared!r}",
                            script=str(path))
    return tuple(declared)


def script_sm_range(module, path: Path) -> tuple[int, int | None]:
    """The CUDA compute capabilities a script's kernels are built for: its MIN_SM (e.g. 90, else 0) and
    MAX_SM (e.g. 89, else no limit)."""
    lowest = getattr(module, "MIN_SM", 0)
    highest = getattr(module, "MAX_SM", None)
    for name, value in (("MIN_SM", lowest), ("MAX_SM", highest)):
        if value is not None and (type(value) is not int or value < 0):
            raise PipelineError(f"{name} must be a CUDA compute capability such as 90, got {value!r}",
                                script=str(path))
    if highest is not None and highest < lowest:
        raise PipelineError(f"MAX_SM = {highest} is below MIN_SM = {lowest}: no CUDA target would build it",
                            script=str(path))
    return lowest, highest


def load_table(scripts: list[Path | str]) -> KernelTable:
    """Load and validate all scripts; names must be unique across them."""
    kernels: list[KernelSpec] = []
    contracts: dict[str, dict | None] = {}
    seen: dict[str, str] = {}
    if not scripts:
        raise PipelineError("no kernel scripts given")
    for i, s in enumerate(scripts):
        path = Path(s)
        if not path.is_file():
            raise PipelineError("no such kernel script", script=str(path))
        module = load_module(path, i)
        platforms = script_platforms(module, path)
        min_sm, max_sm = script_sm_range(module, path)
        table = call_table(module, path)
        if not table:
            raise PipelineError("get_function_table() returned no kernels", script=str(path))
        sources = local_sources(path)
        script = ScriptSource(path, sources)
        script_kernels = []
        for j, entry in enumerate(table):
            spec = validate_entry(entry, path, j)
            spec = dataclasses.replace(spec, platforms=platforms, min_sm=min_sm, max_sm=max_sm,
                                       source_key=kernel_source_key(spec.func, script, sources))
            if spec.name in seen:
                raise PipelineError(f"duplicate kernel name (first defined in {seen[spec.name]})",
                                    script=str(path), kernel=spec.name)
            seen[spec.name] = str(path)
            script_kernels.append(spec)
        kernels.extend(script_kernels)
        contracts.update(_script_contracts(module, path, script_kernels, contracts))
    return KernelTable(kernels, contracts, [str(s) for s in scripts])


def _script_contracts(module, path: Path, kernels: list[KernelSpec], known: dict) -> dict:
    groups: dict[str, list[KernelSpec]] = {}
    for k in kernels:
        groups.setdefault(k.group, []).append(k)
    declared = {}
    fn = getattr(module, "get_launch_contracts", None)
    if fn is not None:
        try:
            declared = fn()
        except Exception as exc:
            raise PipelineError(f"get_launch_contracts() raised {type(exc).__name__}: {exc}",
                                script=str(path)) from None
        if not isinstance(declared, dict):
            raise PipelineError("get_launch_contracts() must return a dict {group: contract}",
                                script=str(path))
        stray = sorted(set(declared) - set(groups))
        if stray:
            raise PipelineError(f"launch contracts for groups with no kernels: {stray}", script=str(path))
    out = {}
    for group, members in groups.items():
        first = members[0]
        for k in members[1:]:
            if [p.type for p in k.params] != [p.type for p in first.params]:  # `:16` hints may differ
                raise PipelineError(
                    f"group '{group}' mixes argument types ('{first.sig_string()}' in {first.name}); every "
                    "kernel of a group is launched with the same argument struct",
                    script=str(path), kernel=k.name)
        if group in known and group not in declared:
            out[group] = known[group]
            continue
        if group in declared:
            names = set().union(*(k.constants.keys() for k in members))
            out[group] = validate_contract(group, declared[group], len(first.params), names, str(path))
        else:
            out[group] = None
    return out
