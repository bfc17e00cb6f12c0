"""Runs kernels under Triton's interpreter against float64; started by test_interpreter.py with
TRITON_INTERPRET=1 (which must be set before the scripts' @triton.jit decorators run).

    TRITON_INTERPRET=1 python -m tests.kernels.interpret_worker SPEC.json

SPEC is a list of kernels ({script, name, group, constants, num_warps, contract}); one JSON line is
printed per kernel: {name, problem, error} (error None when it matched float64).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path

import numpy as np
from tritonforge.runtime.expressions import evaluate
from tritonforge.runtime.memory import from_storage, to_storage
from tritonforge.runtime.ops.attention import attention_mismatch, attention_ref
from tritonforge.runtime.ops.group_norm import group_norm_mismatch, group_norm_ref
from tritonforge.runtime.ops.softmax import softmax_ref
from tritonforge.runtime.reference import mismatch, quantize

from . import interpreter
from .interpreter import HostTensor

_modules: dict = {}


def entry_func(script: str, name: str):
    """The interpreted jit function of table entry `name` (each script executed once, as ORT does)."""
    if script not in _modules:
        path = Path(script).resolve()
        sys.path.insert(0, str(path.parent))  # helpers beside the script
        spec = importlib.util.spec_from_file_location(f"interpreted_{len(_modules)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for loaded in [module, *sys.modules.values()]:
            if str(getattr(loaded, "__file__", "") or "").startswith(str(path.parent)):
                interpreter.rebind(loaded)
        _modules[script] = {e["name"]: e["func"] for e in module.get_function_table()}
    return _modules[script][name]


def storage(x: np.ndarray, dtype: str) -> HostTensor:
    return HostTensor(to_storage(x, dtype), bfloat16=dtype == "bf16")


def admitted(contract: dict, scope: dict) -> bool:
    return all(evaluate(r, scope) for r in contract["requires"])


def softmax_problem(k: dict) -> dict | None:
    """The smallest awkward (batch, n_cols) the contract admits: rows past the block, a partial block."""
    c = k["constants"]
    block, chunk = c.get("BLOCK_SIZE", 1024), c.get("CHUNK", 0)
    cols = [block - 3, block, block // 2 + 16, 77, 1000, 4096 + 16]
    if chunk:
        cols += [2 * chunk + 16, 3 * chunk - 5]
    rows = c.get("ROWS", 1)
    for n_cols in sorted({n for n in cols if 1 <= n <= 70000}):
        for batch in (3, 2 * rows + 1):
            scope = {**c, "num_warps": k["num_warps"], "batch": batch, "n_cols": n_cols, "in_stride": n_cols,
                     "out_stride": n_cols}
            if admitted(k["contract"], scope):
                return scope
    return None


def group_norm_problem(k: dict) -> dict | None:
    c = k["constants"]
    block, vec = c.get("BLOCK_SIZE", c.get("VEC", 8) * 4), max(1, c.get("VEC", 1))
    step = c.get("TILES", 1) * c.get("HW_SIZE", 16)
    cpgs = [block, max(1, block * 3 // 4), block - vec, 3 * vec, 5 * vec, 8, 16, 40]
    # three steps with a partial last one first (pass 1's loop, pass 2's walk back), then one step
    hws = [3 * step + c.get("HW_SIZE", 1)] + sorted({step, 49, 64, 100, 256, 1024})
    for hw in hws:
        for cpg in sorted({p for p in cpgs if 1 <= p <= 512}):
            scope = {**c, "num_warps": k["num_warps"], "n": 2, "hw": hw, "c": 2 * cpg, "groups": 2,
                     "c_per_group": cpg, "silu": c.get("ACTIVATION_SILU", 0)}
            if admitted(k["contract"], scope):
                return scope
    return None


def nchw_problem(k: dict) -> dict | None:
    """Spans of several blocks with a partial last one, channels that do not fill a block."""
    c = k["constants"]
    block = c["BLOCK"]
    for hw in (block // 2 + 16, 3 * block // 4 + 3, 48, 5):
        for cpg in (3, 5):
            scope = {**c, "num_warps": k["num_warps"], "n": 2, "hw": hw, "c": 2 * cpg, "groups": 2,
                     "c_per_group": cpg, "silu": c.get("ACTIVATION_SILU", 0)}
            if admitted(k["contract"], scope):
                return scope
    return None


def run_nchw(k: dict, func, p: dict, dtype: str, rng) -> str | None:
    n, hw, c, groups = p["n"], p["hw"], p["c"], p["groups"]
    x = (rng.standard_normal((n, c, hw)) * 2 + 40.0).astype(np.float32)  # a mean far from zero
    scale = rng.uniform(0.5, 1.5, c).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    y = storage(np.full(x.shape, np.nan, np.float32), dtype)
    values = {"in": storage(x, dtype), "out": y, "nchw_scale": HostTensor(scale), "nchw_bias": HostTensor(bias),
              "hw": hw, "c_per_group": c // groups, "eps": 1e-5}
    grid = tuple(evaluate(g, p) for g in k["contract"]["grid"])
    func[grid](*(values[r] for r in k["contract"]["params"]), **k["constants"], num_warps=k["num_warps"])
    nhwc = quantize(x, dtype).transpose(0, 2, 1).reshape(n, hw, 1, c)
    ref, _ = group_norm_ref(nhwc, scale, bias, groups, 1e-5, bool(p["silu"]))
    ref = ref.reshape(n, hw, c).transpose(0, 2, 1)
    return group_norm_mismatch(from_storage(y.array, dtype), ref, dtype)


def run_softmax(k: dict, func, p: dict, dtype: str, rng) -> str | None:
    log = k["group"].startswith("log_softmax")
    x = (rng.standard_normal((p["batch"], p["n_cols"])) * 3).astype(np.float32 if dtype != "fp64" else np.float64)
    y = storage(np.full(x.shape, np.nan), dtype)
    values = {"out": y, "in": storage(x, dtype), "in_stride": p["n_cols"], "out_stride": p["n_cols"],
              "n_cols": p["n_cols"], "batch": p["batch"]}
    grid = tuple(evaluate(g, p) for g in k["contract"]["grid"])
    func[grid](*(values[r] for r in k["contract"]["params"]), **k["constants"], num_warps=k["num_warps"])
    got = from_storage(y.array, dtype)
    return mismatch(got, softmax_ref(quantize(x, dtype), log), dtype, log)


def run_group_norm(k: dict, func, p: dict, dtype: str, rng) -> str | None:
    n, hw, c, groups = p["n"], p["hw"], p["c"], p["groups"]
    x = (rng.standard_normal((n * hw, c)) * 2 + 0.5).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    y = storage(np.full(x.shape, np.nan, np.float32), dtype)
    unused = storage(np.zeros(1, np.float32), dtype)
    values = {"in": storage(x, dtype), "skip": unused, "bias": unused, "out": y, "add_out": unused,
              "gamma": HostTensor(gamma), "beta": HostTensor(beta), "hw": hw, "c": c, "c_per_group": c // groups,
              "groups": groups, "eps": 1e-5, "has_skip": False, "has_bias": False, "broadcast_skip": False}
    grid = tuple(evaluate(g, p) for g in k["contract"]["grid"])
    func[grid](*(values[r] for r in k["contract"]["params"]), **k["constants"], num_warps=k["num_warps"])
    ref, _ = group_norm_ref(quantize(x, dtype).reshape(n, hw, 1, c), gamma, beta, groups, 1e-5, bool(p["silu"]))
    return group_norm_mismatch(from_storage(y.array, dtype), ref.reshape(n * hw, c), dtype)


def attention_problem(k: dict) -> dict | None:
    """A head the split masks, a partial last key block and query block, two heads (or the spec's own)."""
    c = k["constants"]
    if "problem" in k:
        return {**c, "num_warps": k["num_warps"], **k["problem"]}
    for d in (c["D1"] + c["D2"] - 8, c["D1"] + c["D2"]):
        scope = {**c, "num_warps": k["num_warps"], "batch": 1, "heads": 2, "sq": c["BLOCK_M"] + 3,
                 "skv": c["BLOCK_N"] + 5, "head_dim": d, "strides8": 1}
        if admitted(k["contract"], scope):
            return scope
    return None


def run_attention(k: dict, func, p: dict, dtype: str, rng) -> str | None:
    """(B, S, H*d) projections, as the library's op passes them."""
    b, h, sq, skv, d = p["batch"], p["heads"], p["sq"], p["skv"], p["head_dim"]
    q, kk, v = ((rng.standard_normal((b, s, h * d))).astype(np.float32) for s in (sq, skv, skv))
    out = storage(np.full((b, sq, h * d), np.nan, np.float32), dtype)
    strides = lambda s: {"batch_stride": s * h * d, "head_stride": d, "seq_stride": h * d}
    values = {"q": storage(q, dtype), "k": storage(kk, dtype), "v": storage(v, dtype), "out": out,
              "scale": 1 / np.sqrt(d), "heads": h, "sq": sq, "skv": skv, "head_dim": d,
              **{f"{t}_{r}": x for t, s in (("q", sq), ("k", skv), ("v", skv), ("out", sq))
                 for r, x in strides(s).items()}}
    grid = tuple(evaluate(g, p) for g in k["contract"]["grid"])
    func[grid](*(values[r] for r in k["contract"]["params"]), **k["constants"], num_warps=k["num_warps"])
    heads = lambda x: quantize(x, dtype).reshape(b, -1, h, d).transpose(0, 2, 1, 3)
    ref = attention_ref(heads(q), heads(kk), heads(v), causal=bool(k["constants"]["CAUSAL"]))
    got = from_storage(out.array, dtype).reshape(b, sq, h, d).transpose(0, 2, 1, 3)
    return attention_mismatch(got, ref, dtype)


def main(spec_path: str) -> int:
    rng = np.random.default_rng(0)
    for k in json.loads(Path(spec_path).read_text()):
        dtype = k["group"].rsplit("_", 1)[1]
        kind = ("softmax" if "softmax" in k["group"] else "attention" if k["group"].startswith("attention")
                else "nchw" if k["group"].startswith("GroupNormNCHW") else "nhwc")
        problem = {"softmax": softmax_problem, "nchw": nchw_problem, "nhwc": group_norm_problem,
                   "attention": attention_problem}[kind](k)
        if problem is None:
            print(json.dumps({"name": k["name"], "problem": None, "error": "no awkward problem its contract admits"}))
            continue
        try:
            interpreter.NUM_WARPS = k["num_warps"]
            func = entry_func(k["script"], k["name"])
            run = {"softmax": run_softmax, "nchw": run_nchw, "nhwc": run_group_norm, "attention": run_attention}[kind]
            error = run(k, func, problem, dtype, rng)
        except Exception:
            error = "raised " + traceback.format_exc(limit=-2).strip().splitlines()[-1]
        shape = {v: problem[v] for v in ("batch", "n_cols", "n", "hw", "c", "groups", "heads", "sq", "skv", "head_dim")
                 if v in problem}
        print(json.dumps({"name": k["name"], "problem": shape, "error": error}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
