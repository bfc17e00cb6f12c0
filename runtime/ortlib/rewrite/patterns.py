"""The forms of GroupNorm and softmax the rewrite recognises, one declared matcher each.

A matcher names the ops it starts from (`anchors`) and the library op it writes (`target`); `match`
returns the nodes it replaces and the node that replaces them, raises `Left` with the reason when the
anchor is almost its form but not quite (the report names the node and the reason), or returns None
when the anchor is not its business. A new exporter's form is one more class in `PATTERNS`.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from .. import DOMAIN
from ..errors import TritonforgeError
from . import choices
from .graph import FLOAT_TYPES, MS, Graph, attrs, fresh, is_op

_ALL = ("fp16", "fp32", "bf16", "fp64")  # what ONNX's float ops admit; the library has no fp64 kernels
_NP_TYPES = {"float16": "fp16", "float32": "fp32", "bfloat16": "bf16", "float64": "fp64"}


class Left(TritonforgeError):
    """The anchor stays as it is; the message says why (the rewrite reports it and goes on)."""


@dataclass
class Match:
    remove: list  # the nodes replaced, the anchor among them
    node: object  # the node that replaces them
    source: str  # which form it was, for the report
    silu: bool = False
    note: str = ""  # said in the report beside the node (why it went where it went)
    before: list = field(default_factory=list)  # new nodes `node` reads, placed just before it
    after: list = field(default_factory=list)  # new nodes that read `node`, placed just after it
    dtype: str | None = None  # the element type `node` runs in (where its inputs are new values)
    # graph nodes whose work the new nodes do without replacing them (a join's bias Adds): no later match takes
    # them, and they go where nothing reads them any more
    claims: list = field(default_factory=list)
    site: tuple = ()  # (scope, index of the anchor node): where the match was made (measure.py keys on it)


@dataclass(frozen=True)
class Choice:
    """What a site's measured verdict (or a measurement's trial) asks of a matcher's choice between the export's
    nodes and the rewrite's: "export", "library" or "ort" (the library's op, or ORT's where both could be written),
    and why."""

    pick: str
    why: str = ""

    def take(self) -> None:
        """Left with the measured reason where the export's nodes are to stay."""
        if self.pick == "export":
            raise Left(self.why)


class Rewriter:
    """What the matchers share: the graph, the library's CUDA dtypes per op (None: any), the softmax
    thresholds (None: the measured speed-ups), where attention goes ("tritonforge", "ort" or None: the
    measured choice), and the fp32 initializers they add. `prefer` ("library" or "ort") takes that candidate at
    every choice the tables would make (a measurement's trial); `verdicts` ({site: Choice}) the choice measured for
    a site on this GPU (measure.py); the tables decide where neither says."""

    def __init__(self, graph: Graph, cuda: dict | None, min_cols: dict | None, attention: str | None = None,
                 prefer: str | None = None, verdicts: dict | None = None):
        self.graph, self.cuda, self.min_cols, self.attention = graph, cuda, min_cols, attention
        self.prefer, self.verdicts = prefer, verdicts or {}
        self.index: dict[int, int] = {}  # id() of a scope's node -> its index (the site of a match it anchors)
        self.anchor: tuple = ()  # the site being matched
        self.consulted: set = set()  # the sites whose matches made a choice the tables (or a verdict) decide
        self.initializers: list = []
        self.taken: set[int] = set()  # id() of the nodes the scope's matches so far replace
        self.notes: Counter = Counter()  # why a kind of node went where it went, said once for all of them
        self._int64: dict[tuple, str] = {}

    def site(self, node) -> tuple:
        return (self.graph.where, self.index.get(id(node), -1))

    def choice(self, node=None) -> Choice | None:
        """The choice asked of the match at `node`'s site (default: the anchor's): the site's measured verdict, else
        the trial's preference; None where the tables decide."""
        site = self.anchor if node is None else self.site(node)
        self.consulted.add(site)
        if site in self.verdicts:
            return self.verdicts[site]
        return Choice(self.prefer, "a measurement's trial") if self.prefer else None

    def dtype(self, value: str, fallback: str | None = None) -> str | None:
        elem = self.graph.elem(value)
        if elem and elem not in FLOAT_TYPES:
            raise Left(f"X is not float16, float or bfloat16 (ONNX type {elem})")
        return FLOAT_TYPES.get(elem, fallback)

    def check_served(self, op: str, dtype: str | None, allowed=_ALL) -> None:
        """The library runs `op` for `dtype` on CUDA; with the dtype unknown, for every type `allowed` admits."""
        if dtype == "fp64" or (dtype is None and "fp64" in allowed):
            raise Left("X is double, which the library's ops do not take" if dtype else
                       "X's element type is not known, and the op admits double")
        if self.cuda is None:
            return
        served = set(self.cuda.get(op, []))
        if dtype is not None and dtype not in served:
            raise Left(f"the library has no CUDA {op} kernel for {dtype}")
        if dtype is None and not set(allowed) <= served:
            raise Left(f"X's element type is not known, and the library's CUDA {op} serves only "
                       f"{', '.join(sorted(served)) or 'nothing'}")

    def fp32(self, values: np.ndarray, base: str) -> str:
        return self.typed(np.asarray(values, dtype=np.float32), base)

    def typed(self, values: np.ndarray, base: str) -> str:
        """An initializer of `values` in their own element type (float16, bfloat16: X's, for a node that reads them
        beside X)."""
        from onnx import numpy_helper

        name = self.graph.unique(base)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(values), name))
        return name

    def int64(self, values: list, base: str) -> str:
        """An int64 initializer of `values` (one per distinct value: shapes the new Reshapes share)."""
        from onnx import numpy_helper

        key = tuple(int(v) for v in values)
        if key not in self._int64:
            self._int64[key] = self.graph.unique(base)
            self.initializers.append(numpy_helper.from_array(np.array(key, np.int64), self._int64[key]))
        return self._int64[key]

    def node_name(self, base: str) -> str:
        """`base`, or `base_<k>` when a node of the model has that name."""
        return fresh(base, self.graph.node_names)


def measured_form(r: Rewriter, x: str, table: str, what: str, form: str, key: str = "SPEEDUP") -> str:
    """X's dtype where `what` (an op the rewrite writes, e.g. "ORT's FastGelu") measured faster than the export's
    `form` of nodes in that dtype's own rows (choices.table(`table`)'s `key` entries: {dtype: {form: speed-up}});
    Left naming the reason otherwise: the dtype unknown, not measured, or measured slower."""
    dtype = r.dtype(x)
    if dtype is None:
        raise Left("X's element type is not known")
    chosen = r.choice()
    if chosen is not None:
        chosen.take()
        return dtype
    t = choices.table(table)
    device = t.devices.get(dtype) or t.device
    speedup = (t.library if key == "LIBRARY" else t.speedup).get(dtype, {}).get(form)
    if speedup is None:
        raise Left(f"{what} was not measured against the export's {form} form in {dtype} on {device}: the "
                   "export's nodes kept")
    if speedup < 1:
        raise Left(f"the export's nodes measured faster than {what} ({speedup:.2f}x, {form}, {dtype}, {device})")
    return dtype


def measured_ort_op(r: Rewriter, x: str, table: str, op: str, form: str, why: str = "") -> str:
    """X's dtype where ORT's own `op` measured faster than the export's `form` (measured_form) and an execution
    provider of the installed onnxruntime runs it in that dtype; Left naming the reason otherwise."""
    from .loads import ort_runs

    dtype = measured_form(r, x, table, f"ORT's {op}", form)
    if not ort_runs(MS, op, dtype):
        raise Left(f"no execution provider of the installed onnxruntime runs ORT's {op} in {dtype}{why}")
    return dtype


def bias_add(g, x: str, readers: list):
    """(y, b's name, b, Add) where x = Add(y, b) of a constant b with one value per last-axis element, and
    only `readers` read x; else None."""
    add = g.producer.get(x)
    if not is_op(add, "Add") or x in g.outputs or {id(n) for n in g.consumers.get(x, [])} - {id(n) for n in readers}:
        return None
    dims = g.dims(x)
    for i, j in ((0, 1), (1, 0)):
        b = g.const(add.input[j])
        if b is None or b.size < 2 or not dims or dims[-1] != b.size or b.shape[-1] != b.size:
            continue
        return add.input[i], add.input[j], b, add
    return None


def bias_input(r: Rewriter, name: str, b: np.ndarray) -> str:
    """The bias as ORT's fused ops take it: 1-D of X's type (the initializer itself where it is 1-D already)."""
    g = r.graph
    if name in g.inits and len(g.inits[name].dims) == 1:
        return name
    from onnx import numpy_helper

    new = g.unique(f"{name}_tf_1d")
    r.initializers.append(numpy_helper.from_array(np.ascontiguousarray(b.reshape(-1)), new))
    return new


def times_const(g, node, c: float) -> str | None:
    """The other operand of Mul(v, c) with the scalar constant c (either order), else None."""
    if not is_op(node, "Mul"):
        return None
    for i, j in ((0, 1), (1, 0)):
        s = g.scalar(node.input[j])
        if s is not None and math.isclose(s, c, rel_tol=2e-3):
            return node.input[i]
    return None


def silu_after(g: Graph, value: str):
    """(Sigmoid, Mul) when `value` is read only by y * Sigmoid(y), in either operand order."""
    users = g.consumers.get(value, [])
    if value in g.outputs or len(users) != 2:
        return None
    sig = next((u for u in users if is_op(u, "Sigmoid")), None)
    mul = next((u for u in users if is_op(u, "Mul")), None)
    if sig is None or mul is None or sorted(mul.input) != sorted([value, sig.output[0]]):
        return None
    return (sig, mul) if g.only_reader(sig.output[0]) is mul else None


def _per_channel(v: np.ndarray, rank: int, c: int | None) -> np.ndarray | None:
    """v as one value per channel of an (N, C, ...) tensor it broadcasts against, or None."""
    if v.ndim > rank:
        return None
    shape = (1,) * (rank - v.ndim) + v.shape
    if any(s != 1 for i, s in enumerate(shape) if i != 1) or (c and shape[1] not in (1, c)):
        return None
    return v.reshape(-1)


class GroupNormalizationOp:
    """ONNX GroupNormalization (opset 18-20: scale and bias per group; 21 and later: per channel), NCHW,
    and a following SiLU."""

    anchors = {("", "GroupNormalization")}
    target = "GroupNormalization"
    source = "ONNX GroupNormalization"

    def match(self, r: Rewriter, node):
        g = r.graph
        if g.opset < 18:
            return None
        x = node.input[0]
        dims = g.dims(x)
        if dims is None or len(dims) < 3:
            raise Left("X's rank is not known, or is under 3")
        a = attrs(node)
        if a.get("stash_type", 1) != 1:
            raise Left("stash_type is not float32")
        scale, bias = g.const(node.input[1]), g.const(node.input[2])
        if scale is None or bias is None:
            raise Left("scale and bias are not constants")
        r.check_served(self.target, r.dtype(x, _NP_TYPES.get(scale.dtype.name)))  # scale is X's type
        groups, c = int(a["num_groups"]), dims[1]
        per_group = g.opset < 21
        if per_group and not c:
            raise Left("opset-18 scale per group needs the channel count, which the model does not state")
        want = groups if per_group else c
        if want and scale.size != want:
            raise Left(f"scale has {list(scale.shape)} values, expected {want}")
        repeat = c // groups if per_group else 1
        silu = silu_after(g, node.output[0])
        out = silu[1].output[0] if silu else node.output[0]
        new = _group_normalization(r, node.name, x, out, np.repeat(scale.reshape(-1), repeat),
                                   np.repeat(bias.reshape(-1), repeat), groups, float(a.get("epsilon", 1e-5)), silu)
        return Match([node, *(silu or ())], new, self.source, bool(silu))


class InstanceNormGroupNorm:
    """GroupNorm as torch.onnx writes it, the TorchScript and the dynamo exporters alike:

        x (N, C, ...) -> Reshape [0 or N, G, -1] -> InstanceNormalization(scale ones(G), B zeros(G), epsilon)
          -> Reshape back to x's shape (Shape(x), or x's dims as a constant)
          [-> Mul weight] [-> Add bias]     constants per channel: (C,1,1), (1,C,1,1), (C,1) for 3-D x, seen
                                            through Identity, Unsqueeze and Expand
          [-> y * Sigmoid(y)]
    """

    anchors = {("", "InstanceNormalization")}
    target = "GroupNormalization"
    source = "InstanceNormalization pattern"

    def match(self, r: Rewriter, norm):
        g = r.graph
        pre = g.producer.get(norm.input[0])
        if not is_op(pre, "Reshape"):
            raise Left("not a GroupNorm: its input is not a Reshape that groups channels")
        x = pre.input[0]
        scale, zero = g.const(norm.input[1]), g.const(norm.input[2])
        if scale is None or zero is None:
            raise Left("not a GroupNorm: its scale or B is not a constant")
        if not np.all(scale == 1):
            raise Left("not a GroupNorm: its scale is not all ones (a per-group scale)")
        if not np.all(zero == 0):
            raise Left("not a GroupNorm: its B is not all zeros (a per-group bias)")
        groups = int(scale.size)
        dims = g.dims(x)
        if dims is None or len(dims) < 3:
            raise Left("X's rank is not known, or is under 3")
        rank, c = len(dims), dims[1]
        why = _regroups(g.const(pre.input[1]), attrs(pre).get("allowzero", 0), groups, dims)
        if why:
            raise Left(f"the Reshape '{pre.name}' before it does not group X's channels: {why}")
        if g.only_reader(pre.output[0]) is not norm:
            raise Left("the grouped values are read by other nodes too")
        post = g.only_reader(norm.output[0])
        if not is_op(post, "Reshape"):
            raise Left("its output is not reshaped back to X's shape (or is read by other nodes too)")
        shape_of_x = g.producer.get(post.input[1])
        if _whole_shape_of(shape_of_x, x, rank):
            chain = [pre, norm, post] + ([shape_of_x] if g.only_reader(post.input[1]) is post else [])
        else:
            back = g.const(post.input[1])
            grouped = g.dims(norm.output[0]) or []
            if back is not None and not attrs(post).get("allowzero", 0):
                back = [grouped[i] if s == 0 and i < len(grouped) else int(s) for i, s in enumerate(back)]
            if back is None or None in dims or list(back) != list(dims):
                raise Left(f"the Reshape '{post.name}' after it does not restore X's shape {dims}")
            chain = [pre, norm, post]
        y = post.output[0]
        affine = {}
        for op in ("Mul", "Add"):
            nxt = g.only_reader(y)
            if not is_op(nxt, op) or list(nxt.input).count(y) != 1:
                continue
            other = nxt.input[1] if nxt.input[0] == y else nxt.input[0]
            v = g.const(other)
            v = _per_channel(v, rank, c) if v is not None else None
            if v is None:
                break
            affine[op], c = v, c or (v.size if v.size > 1 else None)
            chain.append(nxt)
            y = nxt.output[0]
        if not c:
            raise Left("X's channel count is not known")
        if c % groups:
            raise Left(f"{groups} groups do not divide X's {c} channels")
        dtype = r.dtype(x, _NP_TYPES.get(scale.dtype.name))
        r.check_served(self.target, dtype)
        silu = silu_after(g, y)
        out = silu[1].output[0] if silu else y
        weight = np.broadcast_to(affine.get("Mul", np.ones(1)), (c,))
        bias = np.broadcast_to(affine.get("Add", np.zeros(1)), (c,))
        name = r.node_name(norm.name.replace("InstanceNormalization", "GroupNorm")) if norm.name else ""
        new = _group_normalization(r, name, x, out, weight, bias, groups, float(attrs(norm).get("epsilon", 1e-5)),
                                   silu)
        return Match([*chain, *(silu or ())], new, self.source, bool(silu))


def _whole_shape_of(node, x: str, rank: int) -> bool:
    """`node` is Shape(x) of every axis (TorchScript writes no attributes, dynamo start=0)."""
    if not is_op(node, "Shape") or node.input[0] != x:
        return False
    a = attrs(node)
    return a.get("start", 0) in (0, -rank) and a.get("end", rank) >= rank


def _regroups(shape, allowzero: int, groups: int, dims: list) -> str | None:
    """Why Reshape(x, shape) is not (N, groups, rest) of x (N, C, ...), or None when it is."""
    if shape is None:
        return "its shape is not a constant"
    s = [int(v) for v in np.asarray(shape).reshape(-1)]
    if len(s) != 3 or s[1] != groups:
        return f"shape {s} is not [N, {groups}, -1]"
    if not ((s[0] == 0 and not allowzero) or (dims[0] is not None and s[0] == dims[0])):
        return f"shape {s} does not keep the batch"
    c = dims[1] if len(dims) > 1 else None
    rest = (c // groups) * int(np.prod(dims[2:])) if c and None not in dims[2:] else None
    if s[2] != -1 and s[2] != rest:
        return f"shape {s} does not hold a group's channels and pixels in its last axis"
    return None


def _group_normalization(r: Rewriter, name: str, x: str, out: str, scale, bias, groups: int, eps: float, silu):
    from onnx import helper

    s32 = r.fp32(scale, f"{name or out}_tf_scale")
    b32 = r.fp32(bias, f"{name or out}_tf_bias")
    return helper.make_node("GroupNormalization", [x, s32, b32], [out], name=name, domain=DOMAIN,
                            num_groups=groups, epsilon=eps, activation=1 if silu else 0)


class OrtGroupNorm:
    """ORT's fused com.microsoft.GroupNorm and SkipGroupNorm (what its Stable Diffusion optimizer writes,
    after NhwcConv, Transpose or Add): NHWC to tritonforge.GroupNorm / SkipGroupNorm, GroupNorm with
    channels_last=0 to tritonforge.GroupNormalization; gamma and beta made fp32 where they are not."""

    anchors = {(MS, "GroupNorm"), (MS, "SkipGroupNorm")}
    allowed = ("fp16", "fp32")  # ORT's kernels: float and float16
    source = "com.microsoft fused op"

    def match(self, r: Rewriter, node):
        from onnx import helper

        g = r.graph
        a = attrs(node)
        nchw = a.get("channels_last", 1) != 1
        if nchw and node.op_type == "SkipGroupNorm":
            raise Left("channels_last=0 is not the NHWC op")
        target = "GroupNormalization" if nchw else node.op_type
        r.check_served(target, r.dtype(node.input[0]), self.allowed)
        inputs = list(node.input)
        base = node.name or node.output[0]
        for k, role in ((1, "gamma"), (2, "beta")):
            if g.elem(inputs[k]) == 1:  # float already: the library's ops take it as it is
                continue
            v = g.const(inputs[k])
            if v is None:
                raise Left(f"{role} is not float and not a constant")
            inputs[k] = r.fp32(v.reshape(-1), f"{base}_tf_{role}")
        if nchw:
            new = helper.make_node("GroupNormalization", inputs[:3], [node.output[0]], name=node.name, domain=DOMAIN,
                                   num_groups=int(a["groups"]), epsilon=float(a.get("epsilon", 1e-5)),
                                   activation=int(a.get("activation", 0)))
        else:
            kept = {k: v for k, v in a.items() if k in ("activation", "epsilon", "groups", "channels_last")}
            outputs = list(node.output)
            if node.op_type == "SkipGroupNorm" and (len(outputs) < 2 or not outputs[1]):
                # the sum output named: onnxruntime before 1.21 fails its shape inference on an optional output
                # left out (the kernel writes the sum either way)
                outputs = [outputs[0], g.unique(f"{outputs[0]}_tf_sum")]
            new = helper.make_node(node.op_type, inputs, outputs, name=node.name, domain=DOMAIN, **kept)
        return Match([node], new, self.source)


def measured(dtype: str | None) -> dict[int, float]:
    """The library's softmax speed-up over ORT's own per measured row length in `dtype`'s own rows
    (choices.table("softmax"), which benchmarks/choices.py derives from the committed rows); Left naming
    the dtype where it has none (bf16: no ORT rival measured) or is not known."""
    if dtype is None:
        raise Left("X's element type is not known, and the softmax tables are per type")
    t = choices.table("softmax")
    if not t.speedup.get(dtype):
        raise Left(f"the library's softmax was not measured against ORT's own in {dtype} on {t.device}: ORT's node "
                   f"kept; {LastAxisSoftmax.anyway}")
    return t.speedup[dtype]


def measured_speedup(dtype: str | None, cols: int) -> tuple[int, float]:
    """(the measured row length nearest `cols` on a log scale, the library's speed-up there)."""
    table = measured(dtype)
    near = min(table, key=lambda c: (abs(math.log(c / cols)), c))
    return near, table[near]


class LastAxisSoftmax:
    """ONNX Softmax / LogSoftmax over the last axis, where the library's kernel measured faster than ORT's own
    at that row length (measured_speedup) or, for a length the model leaves symbolic, over all the lengths
    measured; or from Rewriter.min_cols columns when that is given (0: every row)."""

    anchors = {("", "Softmax"), ("", "LogSoftmax")}
    source = "ONNX op"
    anyway = "softmax_min_cols=0 (--all-softmax) rewrites it anyway"

    def match(self, r: Rewriter, node):
        from onnx import helper

        g = r.graph
        x = node.input[0]
        dims = g.dims(x)
        dtype = r.dtype(x)
        if dims is None or not dims:
            raise Left("X's rank is not known")
        rank = len(dims)
        a = attrs(node)
        axis = a.get("axis", -1 if g.opset >= 13 else 1)
        if axis < 0:
            axis += rank
        if axis != rank - 1:
            raise Left(f"axis {a.get('axis')} is not the last of rank {rank}")
        r.check_served(node.op_type, dtype)
        cols = dims[-1]
        chosen = r.choice() if r.min_cols is None else None
        if chosen is not None:
            chosen.take()
        elif r.min_cols is None and not isinstance(cols, int):
            # A length the model leaves symbolic (a dynamic export's attention over H*W) is seen by the op only
            # at run time: it goes to the library where its kernels measured faster over every length measured.
            table = measured(dtype)
            overall = math.exp(sum(math.log(v) for v in table.values()) / len(table))
            if overall < 1:
                raise Left(f"the last axis' length is not fixed by the model, and ORT's own kernel measured faster "
                           f"over the lengths measured ({overall:.2f}x, {dtype}); {self.anyway}")
        elif r.min_cols is None:
            near, speedup = measured_speedup(dtype, cols)
            if cols < near and near == min(measured(dtype)):
                raise Left(f"rows of {cols}: shorter than every row length measured ({near} columns), so ORT "
                           f"keeps them; {self.anyway}")
            if speedup < 1:
                raise Left(f"rows of {cols}: ORT's own kernel measured faster (the library {speedup:.2f}x at {near} "
                           f"columns, {dtype}, {choices.table('softmax').devices[dtype]}); {self.anyway}")
        else:
            shortest = r.min_cols.get(dtype, 0)
            if shortest and not isinstance(cols, int):
                raise Left(f"the last axis' length is not fixed by the model; {self.anyway}")
            if shortest and cols < shortest:
                raise Left(f"rows of {cols}: under the {shortest} columns asked for ({dtype}); {self.anyway}")
        new = helper.make_node(node.op_type, [x], list(node.output), name=node.name, domain=DOMAIN)
        return Match([node], new, self.source)


PATTERNS = (GroupNormalizationOp(), InstanceNormGroupNorm(), OrtGroupNorm(), LastAxisSoftmax())
