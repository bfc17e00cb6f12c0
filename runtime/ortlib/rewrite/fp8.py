"""`--precision fp8`: the model's large Linears as the library's `Fp8Linear`, their weights in fp8 e4m3.

After the rewrite, every Linear by a constant 2-D weight (K, N) of a float16 or bfloat16 model — the library's
`tritonforge.Linear` nodes and the MatMuls the other fusions left in front of their nodes (attention's
projections, BiasConcat's, SkipLayerNormalization's) — that gains in fp8 and whose K and N are multiples of 16
(cuBLASLt's fp8 layouts) becomes `tritonforge.Fp8Linear(X, W_q, w_scale, bias)`: W_q the (N, K) e4m3 weight
(ONNX FLOAT8E4M3FN), one float scale per output channel (its largest magnitude over 448), the bias the Linear's (zero
where the MatMul had none). The activations are quantized per token by the node at run time
(runtime/ortlib/src/fp8_linear.cc). On a GPU without fp8 tensor cores the node runs dequantized (its weight in the
activations' type, no fp8 gain); on the CPU EP it computes the fp8 GPU's numbers (the activations quantized the same
way, both operands dequantized) in double. Each candidate is tried on the model's own activations first
(fp8_check.py): one whose fp8 product strays stays in its type. Whether a Linear gains is timed on the GPU where
the rewrite times its choices (measure.Fp8Timing: the node as it is against its Fp8Linear), and decided by the
break-even measured on the zoo's shapes (`large_enough`) where it is not timed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import DOMAIN
from ..fp8 import quantize_rows
from .fp8_check import MIN_COSINE, activation_rows, fp8_cosine
from .graph import Graph, domain_of, fresh, is_op

# The measured break-even (benchmarks/fp8_linear_bench.py on an H100, rows `fp8_linear` in results.csv): the fp8 node
# pays a quantization pass over its M x K activations for a GEMM that runs up to twice as fast, so it gains where the
# GEMM is long per activation value and large in all. Of the zoo's 35 Linear shapes, fp8 was faster on each with a
# weight (K * N) of at least 2**22 values and at least 2**34 multiply-adds (M * K * N) and slower on every other
# but one (1.06x). M is the rows the graph fixes (or `dims` sizes); where a dim is left open the weight alone decides.
FP8_MIN_WEIGHT = 1 << 22
FP8_MIN_MACS = 1 << 34


def large_enough(k: int, n: int, m: int | None, min_features: int | None) -> bool:
    """Whether a Linear of (K, N) on M rows (None: not fixed) goes to fp8: the measured break-even when
    `min_features` is None, else K and N both at least `min_features` (0 takes every one)."""
    if min_features is not None:
        return min(k, n) >= max(min_features, 1)
    return k * n >= FP8_MIN_WEIGHT and (m is None or m * k * n >= FP8_MIN_MACS)


def _rows(g: Graph, x: str) -> int | None:
    """The rows (M) a Linear's input `x` holds, where the graph fixes or proves its leading dims."""
    dims = g.proved_dims(x)
    if not dims:
        return None
    return int(np.prod(dims[:-1], dtype=np.int64))


def _candidate(g: Graph, node, min_features: int | None, served=None, load: bool = True, typed: Graph | None = None,
               timed: bool = False):
    """(x, W (K, N) as float64, bias name or None, activation, ONNX element type) of a Linear to put in fp8, else
    None. Without `load`, (x, K) of a Linear that may be one, its weight left unread. `timed`: the break-even is
    left to the caller (a timing decides, the rule where it does not)."""
    if domain_of(node) == DOMAIN and node.op_type == "Linear":
        x, w, bias = node.input
        act = next((a.s.decode() for a in node.attribute if a.name == "activation"), "none")
    elif is_op(node, "MatMul") and len(node.input) == 2:
        (x, w), bias, act = node.input, None, "none"
    else:
        return None
    dims = g.dims(w)
    if not dims or len(dims) != 2 or not all(isinstance(d, int) for d in dims):
        return None
    k, n = dims
    # the weight's type is X's (a custom op's output may have no type ONNX inference knows)
    dtype = {10: "fp16", 16: "bf16"}.get(g.elem(x) or g.elem(w))
    if k % 16 or n % 16 or dtype is None or (served is not None and dtype not in served):
        return None
    if (min_features is not None or not timed) and not large_enough(
            k, n, _rows(typed or g, x) if min_features is None else None, min_features):
        return None
    if not load:
        return x, k
    weight = g.weight(w)
    if weight is None or g.const(x) is not None:
        return None
    return x, np.asarray(weight, dtype=np.float64), bias, act, {"fp16": 10, "bf16": 16}[dtype]


@dataclass
class Fp8Result:
    written: list = field(default_factory=list)  # the Fp8Linear nodes' names
    kept: list = field(default_factory=list)  # (node, cosine) of the Linears the check kept in their type
    checked: str = ""  # "checked on the model's own activations (...)", "not checked: <why>", or "" (no check)


def to_fp8(model, min_features: int | None = None, base_dir=None, served=None, check_library=None,
           check: bool = False, dims: dict | None = None, decide=None, scratch=None) -> Fp8Result:
    """Rewrite `model`'s large Linears in place as Fp8Linear nodes (see the module's text). `served`: the dtypes
    ("fp16", "bf16") the library's CUDA Fp8Linear serves (None: any). `check`: try each on the model's own
    activations first (fp8_check.py; `check_library` registered in that session, the model's copy written in
    `scratch`, default the system's temporary folder) and keep those it moves too far.
    `dims`: sizes of the model's symbolic input dims, so the break-even knows the rows they make. `decide(graph,
    node, fp8_node, initializers)`: True or False where it timed the two on this GPU (measure.Fp8Timing), None
    where it did not; without it, or where it says None, the break-even (or `min_features`) decides."""
    from onnx import TensorProto, helper, numpy_helper

    from .measure import sized, symbolic_dims

    g = Graph(model, base_dir)
    typed = None
    if (min_features is None or decide) and dims and set(dims) & set(symbolic_dims(model)):
        typed = Graph(sized(model, dims), base_dir)
    timed = decide is not None
    result = Fp8Result()
    rows = {}
    if check:  # the candidates' inputs and widths first (their weights read once, below)
        found = (_candidate(g, node, min_features, served, load=False, typed=typed, timed=timed) for node in g.nodes)
        widths = dict(f for f in found if f)
        rows = activation_rows(model, base_dir, check_library, widths, scratch) if widths else {}
        if isinstance(rows, str):
            result.checked, rows = f"not checked: {rows}", {}
        elif widths:
            result.checked = f"checked on the model's own activations (random inputs, {len(widths)} distinct)"
    nodes = []
    for node in g.nodes:
        found = _candidate(g, node, min_features, served, typed=typed, timed=timed)
        if found is None:
            nodes.append(node)
            continue
        x, weight, bias, act, elem = found
        q, scale = quantize_rows(weight.T)  # (N, K): one row per output channel
        if x in rows and rows[x].size:
            cos = fp8_cosine(rows[x], weight, q, scale)
            if cos < MIN_COSINE:
                result.kept.append((node.name or node.output[0], cos))
                nodes.append(node)
                continue
        base = (node.name or node.output[0]).rsplit("/", 1)[0] + "/Fp8Linear"
        w_name, s_name = g.unique(base + ".weight_e4m3"), g.unique(base + ".weight_scale")
        inits = [helper.make_tensor(w_name, TensorProto.FLOAT8E4M3FN, q.shape, q.tobytes(), raw=True),
                 numpy_helper.from_array(scale.astype(np.float32), s_name)]
        if bias is None:
            bias = g.unique(base + ".bias")
            zeros = np.zeros(weight.shape[1], dtype=np.uint16)  # float16's and bfloat16's zero: two zero bytes
            inits.append(helper.make_tensor(bias, elem, zeros.shape, zeros.tobytes(), raw=True))
        fp8 = helper.make_node("Fp8Linear", [x, w_name, s_name, bias], list(node.output),
                               name=fresh(base, g.node_names), domain=DOMAIN, activation=act)
        verdict = decide(typed or g, node, fp8, inits) if decide else None
        if verdict is None and timed and min_features is None:  # not timed: the measured break-even
            verdict = large_enough(weight.shape[0], weight.shape[1], _rows(typed or g, x), None)
        if verdict is False:
            nodes.append(node)
            continue
        model.graph.initializer.extend(inits)
        nodes.append(fp8)
        result.written.append(fp8.name)
    if result.written:
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        _drop_unread(model)
        if DOMAIN not in {o.domain for o in model.opset_import}:
            model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return result


def _drop_unread(model) -> None:
    """The fp16 weights the fp8 nodes replaced, where nothing reads them any more."""
    from .graph import every_node

    read = {i for n in every_node(model.graph) for i in n.input} | {o.name for o in model.graph.output}
    keep = [t for t in model.graph.initializer if t.name in read]
    if len(keep) != len(model.graph.initializer):
        del model.graph.initializer[:]
        model.graph.initializer.extend(keep)
