"""The custom-op library for onnxruntime-gpu, built from a build's artifacts.

`build_library(build_dir)` turns one CUDA build directory (a per-arch one or `multi`, which serves every
GPU of the build) into `libtritonforge_ort.so`: the kernels' archive linked whole, plus
`kernel_table.inc`, generated here from the directory's kernels.json. The table holds what the library's
launcher (runtime/ortlib/src/launch.cc) needs of each kernel (symbol, function, warps, shared memory,
argument offsets by role, Triton's hidden parameters) and of each group the ops can use (which op,
dtype, activation) with its launch contract compiled to C++ functions: the contract expressions
(runtime/expressions.py's grammar) are translated node by node, so the library evaluates exactly what
the Python runtime does. The library is compiled against ORT's C API headers (pipeline/package/ort_headers.py)
and the CUDA driver API header the pinned triton wheel ships, by the manylinux toolchain (toolchain.py:
glibc 2.17 and its own libc++), opens libcuda.so.1 at run time, and links neither onnxruntime nor CUDA.
The .so is written beside its build's files atomically.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import tempfile
from pathlib import Path

from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.package import embed, toolchain
from tritonforge.pipeline.package.multi import partial
from tritonforge.runtime.expressions import parse_expr
from tritonforge.runtime.ops import ada_layer_norm as ada_op
from tritonforge.runtime.ops import attention as attention_op
from tritonforge.runtime.ops import bias_concat as bias_concat_op
from tritonforge.runtime.ops import bias_split_gelu as bias_split_gelu_op
from tritonforge.runtime.ops import fp8_quant_rows as fp8_quant_op
from tritonforge.runtime.ops import group_norm as nhwc_op
from tritonforge.runtime.ops import rotary_embedding as rotary_op
from tritonforge.runtime.ops import softmax as softmax_op
from tritonforge.runtime.tune_cache import SCHEMA as TUNE_SCHEMA

from tritonforge import artifact_format
from tritonforge.artifact_format import MULTI
from tritonforge.atomic import write_bytes

LIBRARY_NAME = artifact_format.LIBRARY_NAME
SOURCE_DIR = Path(__file__).resolve().parents[2] / "runtime" / "ortlib" / "src"
SOURCES = ("ops.cc", "group_norm.cc", "softmax.cc", "attention.cc", "ada_layer_norm.cc", "rotary_embedding.cc",
           "bias_concat.cc", "bias_split_gelu.cc", "linear.cc", "fp8_linear.cc", "launch.cc")
EXPORTS = ("RegisterCustomOps", "TritonforgeInfo", "TritonforgeChoices")
DTYPES = ("fp16", "fp32", "bf16")
NCHW_ROLES = {"in", "out", "nchw_scale", "nchw_bias", "ws", "hw", "c_per_group", "eps"}
NCHW_PROBLEM = {"n", "hw", "c", "groups", "c_per_group", "silu", "resident"}
PROBLEM_FIELDS = {"n", "hw", "c", "groups", "c_per_group", "silu", "batch", "n_cols", "in_stride", "out_stride",
                  "resident", "heads", "sq", "skv", "head_dim", "strides8"}
ARG_TYPES = {"i32": "T_I32", "i64": "T_I64", "i1": "T_I1", "fp32": "T_FP32", "u32": "T_U32", "u64": "T_U64"}
OPS = {"nhwc": "OP_GROUP_NORM_NHWC", "nchw": "OP_GROUP_NORM_NCHW", "softmax": "OP_SOFTMAX",
       "log_softmax": "OP_LOG_SOFTMAX", "attention": "OP_ATTENTION", "ada_layer_norm": "OP_ADA_LAYER_NORM",
       "rotary_embedding": "OP_ROTARY_EMBEDDING", "bias_concat": "OP_BIAS_CONCAT",
       "bias_split_gelu": "OP_BIAS_SPLIT_GELU", "fp8_quant_rows": "OP_FP8_QUANT_ROWS"}


def roles() -> list[str]:
    """The argument roles the library knows, in the order of `enum Role` in table.h (lower case)."""
    text = (SOURCE_DIR / "table.h").read_text()
    body = re.search(r"enum Role : int \{(.*?)\};", text, re.S).group(1)
    names = [n.strip() for n in body.replace("\n", " ").split(",") if n.strip()]
    return [n[2:].lower() for n in names if n != "R_COUNT"]


def op_of(group: str, contract: dict | None) -> tuple[str, str, int] | None:
    """(op, dtype, silu) of a group the library's ops can launch, or None: the same rules as the
    runtime's ops (runtime/ops/*.py), by group name and by the roles and problem variables of its
    contract."""
    if not contract:
        return None
    params, problem = set(contract["params"]), set(contract["problem"])
    m = re.fullmatch(r"(GroupNorm[A-Za-z0-9]+)_(Silu|Pass)_(fp16|fp32|bf16)", group)
    if m:
        silu = int(m.group(2) == "Silu")
        if m.group(1).startswith("GroupNormNCHW"):
            return ("nchw", m.group(3), silu) if params <= NCHW_ROLES and problem <= NCHW_PROBLEM else None
        if params <= nhwc_op.ROLES and problem <= nhwc_op.PROBLEM:
            return "nhwc", m.group(3), silu
        return None
    m = re.fullmatch(r"(log_softmax|softmax)(_[A-Za-z0-9]+)*_(fp16|fp32|bf16)", group)
    if m and params <= softmax_op.ROLES and problem <= softmax_op.PROBLEM:
        return m.group(1), m.group(3), -1
    m = attention_op.GROUP.fullmatch(group)
    if m and params <= attention_op.ROLES and problem <= attention_op.PROBLEM:
        return "attention", m.group("dtype"), int(bool(m.group("causal")))
    m = ada_op.GROUP.fullmatch(group)
    if m and params <= ada_op.ROLES and problem <= ada_op.PROBLEM:
        return "ada_layer_norm", m.group("dtype"), ada_op.form_of(m)
    m = rotary_op.GROUP.fullmatch(group)
    if m and params <= rotary_op.ROLES and problem <= rotary_op.PROBLEM:
        return "rotary_embedding", m.group("dtype"), rotary_op.form_of(m)
    m = bias_concat_op.GROUP.fullmatch(group)
    if m and params <= bias_concat_op.ROLES and problem <= bias_concat_op.PROBLEM:
        return "bias_concat", m.group("dtype"), 0
    m = bias_split_gelu_op.GROUP.fullmatch(group)
    if m and params <= bias_split_gelu_op.ROLES and problem <= bias_split_gelu_op.PROBLEM:
        return "bias_split_gelu", m.group("dtype"), 0
    m = fp8_quant_op.GROUP.fullmatch(group)
    if m and params <= fp8_quant_op.ROLES and problem <= fp8_quant_op.PROBLEM:
        return "fp8_quant_rows", m.group("dtype"), 0
    return None


class _Cpp:
    """A contract expression as C++: constants are `k[i]`, warps `w`, problem variables `p.<name>`."""

    def __init__(self, constants: list[str], what: str):
        self.constants, self.what = constants, what

    def __call__(self, expr: str) -> str:
        tree, _ = parse_expr(expr)
        return self.node(tree.body, expr)

    def node(self, n, expr: str) -> str:
        if isinstance(n, ast.Constant):
            return f"INT64_C({int(n.value)})"
        if isinstance(n, ast.Name):
            if n.id in self.constants:
                return f"k[{self.constants.index(n.id)}]"
            if n.id == "num_warps":
                return "w"
            if n.id in PROBLEM_FIELDS:
                return f"p.{n.id}"
            raise PipelineError(f"{self.what}: '{expr}' uses '{n.id}', which the library does not know")
        if isinstance(n, ast.BinOp):
            a, b = self.node(n.left, expr), self.node(n.right, expr)
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}.get(type(n.op))
            if op:
                return f"({a} {op} {b})"
            return f"{'fdiv' if isinstance(n.op, ast.FloorDiv) else 'fmod'}({a}, {b})"
        if isinstance(n, ast.UnaryOp):
            v = self.node(n.operand, expr)
            return f"(-{v})" if isinstance(n.op, ast.USub) else f"(int64_t)!({v})"
        if isinstance(n, ast.BoolOp):
            op = " && " if isinstance(n.op, ast.And) else " || "
            return "(int64_t)(" + op.join(f"({self.node(v, expr)} != 0)" for v in n.values) + ")"
        if isinstance(n, ast.Compare):
            ops = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
            parts, left = [], self.node(n.left, expr)
            for op, right in zip(n.ops, n.comparators):
                r = self.node(right, expr)
                parts.append(f"({left} {ops[type(op)]} {r})")
                left = r
            return "(int64_t)(" + " && ".join(parts) + ")"
        if isinstance(n, ast.Call):
            args = [self.node(a, expr) for a in n.args]
            if n.func.id == "cdiv":
                return f"cdiv({args[0]}, {args[1]})"
            out = args[0]
            for a in args[1:]:
                out = f"std::{n.func.id}<int64_t>({out}, {a})"
            return out
        raise PipelineError(f"{self.what}: cannot translate '{expr}'")


def _c_string(s: str) -> str:
    return json.dumps(s)  # a JSON string of ASCII names is a valid C string literal


def kernel_table(doc: dict) -> tuple[str, int]:
    """kernel_table.inc for a kernels.json document, and how many groups the library can launch."""
    role_ids = {r: i for i, r in enumerate(roles())}
    served = []
    for group, entry in doc["groups"].items():
        op = op_of(group, entry.get("contract"))
        if op:
            served.append((group, entry["contract"], op))
    by_group: dict[str, list[dict]] = {}
    for k in doc["kernels"]:
        by_group.setdefault(k["group"], []).append(k)
    out = ["// Generated by tritonforge.pipeline.package.ortlib from kernels.json; do not edit.",
           "#include <algorithm>", '#include "table.h"', "namespace tf {", "namespace {",
           "inline int64_t fdiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) "
           "? q - 1 : q; }",
           "inline int64_t fmod(int64_t a, int64_t b) { return a - fdiv(a, b) * b; }",
           "inline int64_t cdiv(int64_t a, int64_t b) { return -fdiv(-a, b); }",
           "}  // namespace", "}  // namespace tf"]
    externs, kernels, groups, funcs, first = [], [], [], [], 0
    for gi, (group, contract, (op, dtype, silu)) in enumerate(served):
        members = by_group.get(group, [])
        if not members:
            continue
        constants = sorted({c for k in members for c in k["constants"]})
        cpp = _Cpp(constants, f"group {group}")
        sig = "(const int64_t* k, int64_t w, const Problem& p)"
        unused = "(void)k; (void)w; (void)p; "
        requires = " && ".join(f"({cpp(r)} != 0)" for r in contract["requires"]) or "true"
        funcs.append(f"bool req_{gi}{sig} {{ {unused}return {requires}; }}")
        funcs.append(f"void grid_{gi}(const int64_t* k, int64_t w, const Problem& p, int64_t o[3]) {{ {unused}"
                     + " ".join(f"o[{a}] = {cpp(g)};" for a, g in enumerate(contract["grid"])) + " }")
        if "cluster" in contract:
            funcs.append(f"void cluster_{gi}(const int64_t* k, int64_t w, const Problem& p, int64_t o[3]) {{ {unused}"
                         + " ".join(f"o[{a}] = {cpp(g)};" for a, g in enumerate(contract["cluster"])) + " }")
        if "workspace" in contract:
            funcs.append(f"int64_t ws_{gi}{sig} {{ {unused}return {cpp(contract['workspace'])}; }}")
        for k in members:
            i = len(kernels)
            params = []
            for p, role in zip(k["params"], contract["params"]):
                if role not in role_ids:
                    raise PipelineError(f"group {group}: the role '{role}' is not one the library knows (table.h)")
                kind = "T_PTR" if p["type"].startswith("*") else ARG_TYPES.get(p["type"])
                if kind is None:
                    raise PipelineError(f"kernel {k['name']}: argument type {p['type']} is not one the library packs")
                params.append(f"{{{role_ids[role]}, {kind}, {p['offset']}, {p.get('divisibility', 1)}, "
                              f"{_c_string(p['name'])}}}")
            hidden = [f"{{{h['offset']}, {h.get('scratch_size', 0)}, {h.get('scratch_align', 1)}}}"
                      for h in k.get("hidden_params", [])]
            values = [str(k["constants"].get(c, 0)) for c in constants]
            externs.append(f'extern "C" const unsigned char {k["symbol"]}[];')
            externs.append(f'extern "C" const unsigned char {k["symbol_end"]}[];')
            cells = params or ['{0, 0, 0, 1, ""}']  # C++ has no empty array
            funcs.append(f"const Param params_{i}[] = {{{', '.join(cells)}}};")
            funcs.append(f"const Hidden hidden_{i}[] = {{{', '.join(hidden) or '{0, 0, 1}'}}};")
            funcs.append(f"const int64_t consts_{i}[] = {{{', '.join(values) or '0'}}};")
            kernels.append(f"  {{{_c_string(k['name'])}, {_c_string(k['func_name'])}, "
                           f"{k['symbol']}, {k['symbol_end']}, "
                           f"{k['threads_per_block']}, {k['shared']}, {k['args_size']}, {k['num_warps']}, "
                           f"{len(params)}, params_{i}, {len(hidden)}, hidden_{i}, consts_{i}}},")
        groups.append(f"  {{{_c_string(group)}, {OPS[op]}, {_c_string(dtype)}, {silu}, {first}, {len(members)}, "
                      f"req_{gi}, grid_{gi}, {f'cluster_{gi}' if 'cluster' in contract else 'nullptr'}, "
                      f"{f'ws_{gi}' if 'workspace' in contract else 'nullptr'}, "
                      f"{'true' if contract.get('cooperative') else 'false'}, "
                      f"{'true' if contract.get('fallback') else 'false'}, "
                      f"{'true' if 'resident' in contract['problem'] else 'false'}}},")
        first += len(members)
    if not kernels:
        raise PipelineError("the build holds no kernel of a group the library's ops launch (GroupNorm, softmax)")
    out[3:3] = externs
    out += ["namespace tf {", "namespace {", *funcs, "}  // namespace",
            "const KernelEntry kKernels[] = {", *kernels, "};", f"const int kKernelCount = {len(kernels)};",
            "const GroupEntry kGroups[] = {", *groups, "};", f"const int kGroupCount = {len(groups)};",
            f"const char kArchiveSha256[] = {_c_string(doc['archive']['sha256'])};",
            f"const char kTarget[] = {_c_string(doc['target'].get('arch_name', ''))};", "}  // namespace tf", ""]
    return "\n".join(out), len(groups)


# The GPUs onnxruntime-gpu's CUDA EP runs on (CUDA 13: Turing and newer), by compute capability.
CUDA_EP_GPUS = (75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121)


def loads_on(contents: list[dict], cc: int) -> bool:
    """Whether a device of compute capability `cc` loads a blob holding `contents` (kernels.json's list): a
    cubin made for it (an `a` cubin for exactly it; before sm_90, one of its major and an older or equal
    minor), or PTX of an arch no newer than it, which the driver JIT-compiles."""
    for c in contents:
        arch = int(c["arch"].removeprefix("sm_").rstrip("a"))
        if c["kind"] == "ptx" and not c["arch"].endswith("a") and arch <= cc:
            return True
        if c["kind"] == "cubin" and (arch == cc or (not c["arch"].endswith("a") and arch // 10 == cc // 10
                                                    and arch <= cc)):
            return True
    return False


def gpus_served(doc: dict) -> tuple[list[int], list[int]]:
    """(the CUDA_EP_GPUS on which every op and dtype the build's kernels serve has a kernel that loads, the
    others): a device takes what loads on it, and each op's groups end in a correctness fallback."""
    ops: dict[tuple, list[dict]] = {}
    contracts = {g: e.get("contract") for g, e in doc["groups"].items()}
    for k in doc["kernels"]:
        op = op_of(k["group"], contracts.get(k["group"]))
        if op:
            ops.setdefault(op, []).append(k)
    def contents(k):  # a per-arch build's kernel is its one cubin
        return k.get("contents") or [{"kind": "cubin", "arch": k["binary"]["arch"]}]

    served = [cc for cc in CUDA_EP_GPUS if all(any(loads_on(contents(k), cc) for k in ks) for ks in ops.values())]
    return served, [cc for cc in CUDA_EP_GPUS if cc not in served]


def with_partial(doc: dict, extra: list[dict], contracts: dict) -> dict:
    """kernels.json's document with the kernels only some of its archs run added (multi.partial), so the
    library's table holds them too: a device takes the blobs that have its arch and skips the others."""
    if not extra:
        return doc
    groups = {g: {"contract": c} for g, c in contracts.items()}
    return {**doc, "kernels": doc["kernels"] + extra, "groups": {**groups, **doc["groups"]}}


def cuda_include() -> Path:
    """The directory of cuda.h: the pinned triton wheel ships it (backends/nvidia/include)."""
    try:
        import triton
    except ImportError:
        raise PipelineError("building the ORT library needs the pinned triton (it ships cuda.h)") from None
    d = Path(triton.__file__).parent / "backends" / "nvidia" / "include"
    if not (d / "cuda.h").is_file():
        raise PipelineError(f"{d}: no cuda.h in this triton wheel")
    return d


def build_library(build_dir: Path | str, cache_dir: Path | str, out: Path | str | None = None) -> Path:
    """Compile and link the library for one CUDA build directory; returns the .so's path (by default
    `<build_dir>/libtritonforge_ort.so`)."""
    from tritonforge.pipeline.package.ort_headers import ensure_headers

    build_dir = Path(build_dir)
    paths = artifact_format.artifact_paths(build_dir)
    try:
        doc = artifact_format.read_kernels_json(paths["manifest"])
    except FileNotFoundError:
        raise PipelineError(f"{paths['manifest']}: missing; build first (invoke build)") from None
    except artifact_format.FormatError as exc:
        raise PipelineError(str(exc)) from None
    if doc["target"].get("backend") != "cuda":
        raise PipelineError(f"{paths['manifest']}: a {doc['target'].get('backend')} build; the ORT library is "
                            "CUDA only")
    archive = paths["archive"]
    if not archive.is_file():
        raise PipelineError(f"{archive}: missing (the library links the build's archive)")
    host = doc.get("host", "x86_64")
    cxx = toolchain.compiler(host)
    extra, extra_blobs, contracts = partial(build_dir) if doc["target"].get("arch_name") == MULTI else ([], [], {})
    table, _ = kernel_table(with_partial(doc, extra, contracts))
    headers = ensure_headers(cache_dir).resolve()  # absolute: the object cache's key holds the flags
    include = cuda_include()
    out = Path(out) if out else build_dir / LIBRARY_NAME
    flags = [*CXXFLAGS, f"-I{SOURCE_DIR}", f"-I{headers}", f"-I{include}"]
    objects = _source_objects(cxx, flags, Path(cache_dir) / OBJECTS_DIR, build_dir, host)
    with tempfile.TemporaryDirectory(prefix="tritonforge-ortlib-") as tmp:
        tmp = Path(tmp)
        (tmp / "kernel_table.cc").write_text(table)
        (tmp / "exports.map").write_text("{ global: " + " ".join(f"{e};" for e in EXPORTS) + " local: *; };\n")
        lib = tmp / LIBRARY_NAME
        archives = [archive.resolve()]
        if extra_blobs:  # the kernels only some archs run, each a blob of those archs (multi.partial)
            (tmp / "partial").mkdir()
            for name, ext, blob in extra_blobs:
                (tmp / "partial" / f"{name}.{ext}").write_bytes(blob)
            objs = [embed.binary_to_object(f"{name}.{ext}", tmp / "partial") for name, ext, _ in extra_blobs]
            archives.append(embed.archive(objs, tmp / "partial", "partial.a"))
        cmd = [*cxx, *flags, "-shared", *map(str, objects), str(tmp / "kernel_table.cc"),
               "-Wl,--whole-archive", *map(str, archives), "-Wl,--no-whole-archive",
               f"-Wl,--version-script={tmp / 'exports.map'}", "-ldl", "-o", str(lib)]
        _run_cxx(cmd, build_dir)
        write_bytes(out, lib.read_bytes())
    return out


CXXFLAGS = ("-std=c++17", "-O2", "-fPIC", "-Wall", "-Wno-unused-function")
OBJECTS_DIR = "ortlib-objects"  # under the tools cache: the library's compiled sources, keyed by their contents


def _run_cxx(cmd: list[str], build_dir: Path) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise PipelineError(f"{build_dir}: compiling {LIBRARY_NAME} failed:\n{proc.stderr[-4000:]}")


def _source_objects(cxx: list[str], flags: list[str], cache: Path, build_dir: Path, host: str) -> list[Path]:
    """The library's own sources compiled once per compiler, flags and source text (they do not depend on
    the build: only kernel_table.cc does), kept under `cache` by that key. They are compiled as one
    translation unit that includes each family's file: ORT's C++ API header, most of the work, is parsed once,
    not once per file (any change recompiles them all anyway: the key covers every source). An include
    directory enters the key by what it holds, not where it lies: a copy of the repository, or of its cache,
    reuses the object."""
    import hashlib

    h = hashlib.sha256(toolchain.version(host).encode())
    for flag in flags:  # the sources' own directory is keyed by the loop below
        where = Path(flag[2:]) if flag.startswith("-I") else None
        if where != SOURCE_DIR:
            h.update((_tree_digest(where) if where and where.is_dir() else flag).encode() + b"\0")
    for f in sorted(SOURCE_DIR.iterdir()):
        if f.suffix in (".cc", ".h"):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    obj = cache / f"ortlib-{h.hexdigest()[:24]}.o"
    if not obj.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache, prefix=".cxx-") as tmp:
            unity = Path(tmp) / "ortlib.cc"
            unity.write_text("".join(f'#include "{source}"\n' for source in SOURCES))  # found through -I SOURCE_DIR
            staged = Path(tmp) / obj.name
            _run_cxx([*cxx, *flags, "-c", str(unity), "-o", str(staged)], build_dir)
            staged.replace(obj)  # atomic: a concurrent build sees the whole object or none
    return [obj]


def _tree_digest(directory: Path) -> str:
    """sha256 of every file under `directory`, by relative path and contents."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(p for p in directory.rglob("*") if p.is_file()):
        h.update(f.relative_to(directory).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def default_build() -> Path:
    """The CUDA build a library is made from by default: the first of runtime.ortlib.DEFAULT_PLACES."""
    from tritonforge.runtime.ortlib import DEFAULT_PLACES

    found = next((p for p in DEFAULT_PLACES if (p / artifact_format.MANIFEST_NAME).is_file()), None)
    if found is None:
        raise PipelineError(f"no CUDA build at {' or '.join(str(p) for p in DEFAULT_PLACES)}: run invoke build "
                            "--platform cuda (or name one with --dist)")
    return found


def tune_caches(tune: Path | str) -> list[Path]:
    """The CUDA tune caches `tune` names: one file, or every <root>/cuda/<arch>/*.json under a root."""
    tune = Path(tune)
    if tune.is_file():
        return [tune]
    return sorted(tune.glob("cuda/*/*.json")) if tune.is_dir() else []


def write_tune_file(lib: Path | str, build_dir: Path | str, caches: list[Path]) -> tuple[Path | None, list[str]]:
    """The library's tune file, `<lib>.tune` beside it: every choice of the tune caches (made by `invoke tune`
    on each GPU runner, for any arch of the build) as "<device>\t<op key>\t<signature>\t<kernel>" lines,
    which the library takes instead of timing candidates. A choice whose kernel the build lacks is left
    out and said so. Returns (path or None when no cache has a choice, notes); the file is replaced whole."""
    lib, doc = Path(lib), artifact_format.read_kernels_json(build_dir)
    names = {k["name"] for k in doc["kernels"]} | {k["name"] for k in doc.get("left_out") or []}
    archs = set(doc["target"].get("archs") or [doc["target"]["arch_name"]])  # multi: every arch inside
    lines, notes = {}, []
    for cache in caches:
        try:
            tuned = json.loads(Path(cache).read_text())
        except (OSError, ValueError) as exc:
            raise PipelineError(f"tune cache {cache}: cannot read it: {exc}") from None
        if not isinstance(tuned, dict) or tuned.get("schema") != TUNE_SCHEMA:
            raise PipelineError(f"tune cache {cache}: not a {TUNE_SCHEMA} file")
        made = tuned.get("validators", {})
        if made.get("triton_version") != doc["triton_version"] or made.get("target") not in archs:
            raise PipelineError(f"tune cache {cache}: made for {made.get('target')} with triton "
                                f"{made.get('triton_version')}, not for this build ({', '.join(sorted(archs))}, "
                                f"triton {doc['triton_version']})")
        device = made.get("device_model", "")
        if not device or "\t" in device:
            raise PipelineError(f"tune cache {cache}: no device_model validator")
        missing = 0
        for op_key, problems in tuned.get("results", {}).items():
            for signature, choice in problems.items():
                if choice["kernel"] in names:
                    lines[f"{device}\t{op_key}\t{signature}"] = choice["kernel"]
                else:
                    missing += 1
        if missing:
            notes.append(f"{cache}: {missing} choices name kernels this build does not hold; left out")
    out = lib.with_suffix(".tune")
    if not lines:
        out.unlink(missing_ok=True)  # a stale file would outlive the caches it came from
        return None, notes
    text = "# tritonforge ORT library choices: device, op key, signature, kernel (from tune caches)\n"
    write_bytes(out, (text + "".join(f"{k}\t{v}\n" for k, v in sorted(lines.items()))).encode())
    return out, notes


def check_library(lib: Path | str, build_dir: Path | str) -> str:
    """Load the library as ORT would and check it against its build: the archive it holds is the build's,
    it reports the groups its ops launch, and (where onnxruntime is installed) it registers in a session
    and its CPU Softmax runs a row correctly. Returns a one-line summary."""
    from tritonforge.runtime import ortlib

    lib = Path(lib)
    doc = artifact_format.read_kernels_json(build_dir)
    try:
        got = ortlib.info(lib)
    except OSError as exc:
        raise PipelineError(f"{lib}: does not load: {exc}") from None
    if got["archive_sha256"] != doc["archive"]["sha256"]:
        raise PipelineError(f"{lib}: holds archive {got['archive_sha256'][:12]}, the build's is "
                            f"{doc['archive']['sha256'][:12]}; rebuild the library")
    served = ", ".join(f"{op} ({'/'.join(sorted(d))})" for op, d in got["cuda"].items() if d)
    try:
        import numpy as np
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return f"{got['kernels']} kernels of {len(got['groups'])} groups; CUDA ops: {served}; {gpus_line(doc)}"
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], domain=ortlib.DOMAIN)], "check",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ortlib.DOMAIN, 1)])
    so = ort.SessionOptions()
    so.register_custom_ops_library(str(lib))
    y = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        None, {"x": np.log(np.array([[1, 2, 5]], np.float32))})[0]
    if not np.allclose(y, [[0.125, 0.25, 0.625]], atol=1e-6):
        raise PipelineError(f"{lib}: its CPU Softmax gave {y.tolist()} for a row of 1:2:5 in onnxruntime "
                            f"{ort.__version__}")
    return (f"{got['kernels']} kernels of {len(got['groups'])} groups; CUDA ops: {served}; {gpus_line(doc)}; loads in "
            f"onnxruntime {ort.__version__}")


def gpus_line(doc: dict) -> str:
    """Which of the CUDA EP's GPUs every op of the build's kernels runs on, for the build's summary line
    (Linear is cuBLASLt's: it runs wherever the CUDA EP does; so does Fp8Linear below sm_89, dequantized)."""
    yes, no = gpus_served(doc)
    line = f"every Triton op on {', '.join(f'sm_{c}' for c in yes) or 'no GPU'}"
    line += f" (not on {', '.join(f'sm_{c}' for c in no)}: build for them with --arch)" if no else ""
    return line + "; Linear (cuBLASLt) on any; Fp8Linear dequantized below sm_89"
