"""One read-only view of a model's graph for the matchers: who makes and who reads each value, the
constants (folded through the few ops exporters put in front of them), and every value's type and shape.
A subgraph (an If branch, a Loop or Scan body) is a view of its own, one scope down: its nodes are its
own, its constants and types reach into the scopes around it, and a value a subgraph reads from outside
counts as read by the node that holds the subgraph, so no matcher removes it.

Types and shapes come from ONNX's shape inference with data propagation (so `Reshape(x, Shape(y))` keeps
its shape) run on a probe of the graph: ops ONNX has no schema for (ORT's contrib ops, this library's)
stand in as ONNX ops that give the same output types and shapes, so inference carries on past them, and
big initializers stand in as typed inputs, so no weight is copied, and small integer arithmetic on constants
(TorchScript's `dim % rank` in front of an unflatten's Slice, which data propagation does not evaluate) stands
in as the constant it computes. Where inference still leaves a value's
element type unknown, it is taken from the first input of the op that makes it when that op keeps its
input's type.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

ONNX_DOMAINS = ("", "ai.onnx")
MS = "com.microsoft"
FLOAT_TYPES = {1: "fp32", 10: "fp16", 16: "bf16"}  # onnx.TensorProto FLOAT, FLOAT16, BFLOAT16
_SMALL = 4096  # initializers up to this many elements are folded and kept in the inference probe
_FOLD_LIMIT = 1 << 16  # constants folded up to this many elements (weights and biases per channel)

# What Graph.const folds through: what exporters put in front of weights and shapes.
_FOLDS = {"Constant", "Shape", "Identity", "Cast", "CastLike", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Concat",
          "Gather", "Add", "Sub", "Mul", "Div"}
_INT_MATHS = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": lambda a, b: np.trunc(a / b)}
# ops whose output has their (first) input's shape, and the elementwise ones that broadcast two inputs
_SAME_SHAPE = {"Erf", "Tanh", "Sigmoid", "Relu", "Neg", "Sqrt", "Exp", "Abs", "Cast", "Identity", "Gelu", "Softplus",
               "Reciprocal", "HardSigmoid", "LeakyRelu", "Clip"}
_BROADCAST = {"Add", "Sub", "Mul", "Div", "Pow"}
_PROVES = _SAME_SHAPE | _BROADCAST | {"LayerNormalization", "Unsqueeze", "Slice", "MatMul", "Gemm"}  # proved_dims
# Ops whose outputs have their first input's type and shape (for the inference probe), by (domain, op).
_SAME_AS_X = {("", "GroupNormalization"), (MS, "GroupNorm"), (MS, "SkipGroupNorm"), (MS, "BiasAdd"),
              (MS, "SkipLayerNormalization"), (MS, "FastGelu"), (MS, "BiasGelu"), (MS, "QuickGelu")}
# Ops whose first output keeps their first input's element type (the fallback when inference stops).
_KEEPS_TYPE = {"Add", "Sub", "Mul", "Div", "Conv", "NhwcConv", "ConvTranspose", "Transpose", "Reshape", "Resize",
               "MatMul", "Gemm", "Softmax", "LogSoftmax", "Sigmoid", "Tanh", "Relu", "Gelu", "Erf", "Sqrt", "Pow",
               "Neg", "Identity", "Concat", "Split", "Slice", "Squeeze", "Unsqueeze", "Expand", "Flatten", "Pad",
               "InstanceNormalization", "GroupNormalization", "LayerNormalization", "GroupNorm", "SkipGroupNorm",
               "BiasAdd", "BiasSplitGelu", "MultiHeadAttention", "Attention", "SkipLayerNormalization",
               "FastGelu", "BiasGelu", "QuickGelu", "ReduceMean", "ReduceSum", "Gather",
               "Tile", "Clip", "AveragePool", "MaxPool", "Einsum", "ScaledDotProductAttention"}


def fresh(base: str, taken: set) -> str:
    """`base`, or `base_<k>` when `taken` has it; added to `taken`."""
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def subgraphs(nodes):
    """The graphs held in `nodes`' attributes (If, Loop, Scan bodies), one level down."""
    for node in nodes:
        for _, g in named_subgraphs(node):
            yield g


def named_subgraphs(node):
    """(attribute name, graph) of each graph `node` holds: If's then_branch and else_branch, Loop's body."""
    for a in node.attribute:
        yield from ([(a.name, a.g)] if a.type == a.GRAPH else [(a.name, g) for g in a.graphs] if a.type == a.GRAPHS
                    else [])


def domain_of(node) -> str:
    return "" if node.domain in ONNX_DOMAINS else node.domain


def is_op(node, op: str, domain: str = "") -> bool:
    """`node` is an `op` of `domain` (ONNX's by default)."""
    return node is not None and node.op_type == op and domain_of(node) == domain


def attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def other_operand(node, value: str) -> str | None:
    """The input of a two-input node that is not `value` (None when `value` is not exactly one of them)."""
    ins = list(node.input) if node is not None else []
    if len(ins) != 2 or ins.count(value) != 1:
        return None
    return ins[1] if ins[0] == value else ins[0]


def outer_reads(node) -> list[str]:
    """The values of the enclosing scopes that `node`'s subgraphs read (at any depth)."""
    out = []
    for sub in subgraphs([node]):
        made = {i.name for i in sub.input} | {t.name for t in sub.initializer} | {o for n in sub.node for o in n.output}
        out += [i for n in sub.node for i in [*n.input, *outer_reads(n)] if i and i not in made]
    return list(dict.fromkeys(out))


class Graph:
    """`nodes` in order, `producer[value]`, `consumers[value]`, `inits[name]`, `outputs` (the graph's),
    `opset` (the default domain's); `const(name)`, `elem(name)`, `dims(name)`. `scope`: a subgraph of the
    model to view (default: the main graph); `outer`: the view of the scope around it; `where`: how the
    report names the scope (" in the then_branch of If node 'cond'")."""

    def __init__(self, model, base_dir: str | Path | None = None, scope=None, outer: Graph | None = None,
                 where: str = ""):
        g = model.graph if scope is None else scope
        self.model, self.scope, self.outer, self.where = model, g, outer, where
        self.base_dir = str(base_dir) if base_dir else None
        self.reindex()
        self.inits = {t.name: t for t in g.initializer}
        self.outputs = {o.name for o in g.output}
        self.opset = next((o.version for o in model.opset_import if o.domain in ONNX_DOMAINS), 0)
        if outer is None:
            self.types = _infer(model, self)
            self.node_names = {n.name for n in every_node(g) if n.name}
            self.names = set(self.types) | _every_name(g)
        else:  # one model: types, names and node names are shared by every scope
            self.types, self.node_names, self.names = outer.types, outer.node_names, outer.names

    def reindex(self) -> None:
        """`nodes`, `producer` and `consumers` from the scope again, after nodes were rewired to read a value of the
        same type and shape, or dropped (rejoin.py, shapes.py): the types inferred stand."""
        self.nodes = list(self.scope.node)
        self.producer = {o: n for n in self.nodes for o in n.output if o}
        self.consumers: dict[str, list] = {}
        for n in self.nodes:
            for i in dict.fromkeys([*n.input, *outer_reads(n)]):
                if i:
                    self.consumers.setdefault(i, []).append(n)
        self._consts: dict[str, np.ndarray | None] = {}
        self._proved: dict[str, list | None] = {}

    # ---- values ------------------------------------------------------------------------------------
    def elem(self, name: str) -> int:
        return self.types.get(name, (0, None))[0]

    def dims(self, name: str) -> list | None:
        """The value's dims (None for a dim the model does not fix), or None when its rank is unknown."""
        return self.types.get(name, (0, None))[1]

    def same_shape(self, a: str, b: str) -> bool:
        """`a` and `b` have one shape as far as inference knows: the same rank, and each dim the same or left
        unknown on one side (a dynamic axis inference lost). The ops that take them check the shapes at run."""
        da, db = self.dims(a), self.dims(b)
        return da is not None and db is not None and len(da) == len(db) and all(
            p is None or q is None or p == q for p, q in zip(da, db))

    def leading_dims(self, name: str, depth: int = 24) -> tuple | None:
        """The dims of `name` but its last, where inference fixes them or a walk back proves them: through
        elementwise ops (a constant spanning only the last axis broadcasts into none of them), a MatMul by a 2-D
        weight, and a Slice of the last axis alone (a GEGLU's halves, whose bounds inference does not fold, so
        what follows them has no dims). None when neither does."""
        dims = self.dims(name)
        if dims and all(isinstance(d, int) for d in dims[:-1]):
            return tuple(dims[:-1])
        node = self.producer.get(name)
        if depth == 0 or node is None or domain_of(node) != "" or not dims:
            return None
        op, ins = node.op_type, [i for i in node.input if i]
        if op in _SAME_SHAPE:
            return self.leading_dims(ins[0], depth - 1)
        if op == "MatMul" and len(self.dims(ins[1]) or ()) == 2 and len(self.dims(ins[0]) or ()) == len(dims):
            return self.leading_dims(ins[0], depth - 1)
        if op == "Slice" and len(ins) > 3 and len(self.dims(ins[0]) or ()) == len(dims):
            axes = self.const(node.input[3])
            if axes is not None and axes.size and all(int(a) in (-1, len(dims) - 1) for a in axes.reshape(-1)):
                return self.leading_dims(ins[0], depth - 1)
            return None
        if op in _BROADCAST and len(ins) == 2:
            found = set()
            for i in ins:
                d = self.dims(i)
                if d is not None and len(d) <= len(dims) and all(v == 1 for v in d[:-1]) and self.const(i) is not None:
                    continue  # a scalar or one value per last-axis element
                if d is None or len(d) != len(dims):
                    return None
                found.add(self.leading_dims(i, depth - 1))
            return found.pop() if len(found) == 1 and None not in found else None
        return None

    def proved_dims(self, name: str, depth: int = 32) -> list | None:
        """The value's dims where inference fixes them or a walk back proves them: through ops that keep their
        input's shape, broadcasting elementwise ops, Unsqueeze, Slice with bounds const() folds, and a MatMul or
        Gemm by a 2-D weight. A chunk's and a GEGLU's halves, whose computed bounds ONNX inference does not fold,
        and what reads them. None when neither does."""
        dims = self.dims(name)
        if dims is not None and all(isinstance(d, int) for d in dims):
            return list(dims)
        if name not in self._proved:
            self._proved[name] = None  # a cycle (invalid model) proves nothing
            try:
                self._proved[name] = self._prove(name, depth) if depth else None
            except Exception:  # a form the walk does not foresee proves nothing
                self._proved[name] = None
        return self._proved[name]

    def _prove(self, name: str, depth: int) -> list | None:
        node = self.producer.get(name)
        if node is None or domain_of(node) != "" or not node.input or name != node.output[0]:
            return None
        op, ins, a = node.op_type, list(node.input), attrs(node)
        if op not in _PROVES or not ins[0]:  # before the walk up: an op it cannot see through ends it here
            return None
        x = self.proved_dims(ins[0], depth - 1)
        if x is None:
            return None
        if op in _SAME_SHAPE or op == "LayerNormalization":
            return x
        if op in _BROADCAST and len(ins) == 2:
            y = self.proved_dims(ins[1], depth - 1)
            return None if y is None else list(np.broadcast_shapes(tuple(x), tuple(y)))
        if op == "Unsqueeze":
            axes = self.const(ins[1]) if len(ins) > 1 and ins[1] else np.array(a.get("axes", []))
            if axes is None or not axes.size:
                return None
            out = list(x)
            rank = len(x) + axes.size
            for axis in sorted(int(v) % rank for v in axes.reshape(-1)):
                out.insert(axis, 1)
            return out
        if op == "Slice" and len(ins) >= 3:
            starts, ends = self.const(ins[1]), self.const(ins[2])
            axes = self.const(ins[3]) if len(ins) > 3 and ins[3] else np.arange(0 if starts is None else starts.size)
            steps = self.const(ins[4]) if len(ins) > 4 and ins[4] else np.ones_like(axes)
            if any(v is None for v in (starts, ends, axes, steps)):
                return None
            out = list(x)
            for s, e, ax, st in zip(*(v.reshape(-1).tolist() for v in (starts, ends, axes, steps))):
                out[ax] = len(range(*slice(s, e, st).indices(out[ax])))
            return out
        w = self.dims(ins[1]) if len(ins) > 1 else None
        if op == "MatMul" and w is not None and len(w) == 2 and len(x) >= 2 and isinstance(w[1], int):
            return [*x[:-1], w[1]]
        if op == "Gemm" and w is not None and len(w) == 2 and len(x) == 2 and all(isinstance(d, int) for d in w):
            return [x[1] if a.get("transA") else x[0], w[0] if a.get("transB") else w[1]]
        return None

    def only_reader(self, name: str):
        """The one node that reads `name`, when nothing else does and it is not a graph output."""
        users = self.consumers.get(name, [])
        return users[0] if len(users) == 1 and name not in self.outputs else None

    def unique(self, base: str) -> str:
        """A value name no value of the model has, taken."""
        return fresh(base, self.names)

    # ---- constants ---------------------------------------------------------------------------------
    def init_array(self, t) -> np.ndarray:
        from onnx import numpy_helper

        return numpy_helper.to_array(t, self.base_dir or "")

    def const(self, name: str) -> np.ndarray | None:
        """The value of `name` when the model fixes it: an initializer or a Constant, seen through Identity,
        Cast, CastLike, Unsqueeze, Squeeze, Reshape, Expand, Concat and Shape of a fixed shape (small
        tensors only: weights per channel, shapes)."""
        if name not in self.inits and name not in self.producer and self.outer is not None:
            return self.outer.const(name)  # made in a scope around this one
        if name not in self._consts:
            self._consts[name] = None  # a cycle (invalid model) folds to nothing
            try:
                value = self._fold(name)
            except Exception:  # anything unexpected in a constant means: not a constant we can use
                value = None
            self._consts[name] = value
        return self._consts[name]

    def weight(self, name: str) -> np.ndarray | None:
        """A weight of any size that the model fixes: an initializer, seen through the Identity and Cast exporters
        put in front of weights, or what const() folds (which stops at small tensors: SD3's patch kernel, 1536 x 16
        x 2 x 2, is past it)."""
        if name in self.inits:
            return self.init_array(self.inits[name])
        node = self.producer.get(name)
        if node is None and self.outer is not None:
            return self.outer.weight(name)
        if node is not None and domain_of(node) == "" and node.op_type in ("Identity", "Cast") and node.input:
            x = self.weight(node.input[0])
            if x is None or node.op_type == "Identity":
                return x
            from onnx import helper

            return x.astype(helper.tensor_dtype_to_np_dtype(attrs(node)["to"]))
        return self.const(name)

    def scalar(self, name: str) -> float | None:
        """The value of `name` when the model fixes it to one number."""
        v = self.const(name)
        return float(v.reshape(-1)[0]) if v is not None and v.size == 1 else None

    def _fold(self, name: str) -> np.ndarray | None:
        from onnx import helper, numpy_helper

        if name in self.inits:
            t = self.inits[name]
            return self.init_array(t) if math.prod(t.dims) <= _FOLD_LIMIT else None
        node = self.producer.get(name)
        if node is None or domain_of(node) != "":
            return None
        op, a = node.op_type, attrs(node)
        if op not in _FOLDS:  # no walk up through ops that are never constant here (the whole graph, else)
            return None
        if op in _INT_MATHS and any(self.elem(i) not in (6, 7) for i in node.input) and not all(
                (d := self.dims(i)) is not None and math.prod(d) == 1 for i in node.input):
            return None  # arithmetic on integers (shape computations) or on float scalars (TorchScript's
            # `int(inner_dim / heads)`), never a float tensor's chain
        if op == "Gather":
            return self._gather(node, a)
        ins = [self.const(i) if i else None for i in node.input] if op not in ("Constant", "Shape") else []
        if op == "Constant":
            if "value" in a:  # its data may lie beside the model, as large exports keep it
                t = a["value"]
                return numpy_helper.to_array(t, self.base_dir or "") if math.prod(t.dims) <= _FOLD_LIMIT else None
            for key, dt in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                            ("value_ints", np.int64)):
                if key in a:
                    return np.array(a[key], dtype=dt)
            return None
        if op == "Shape":
            dims = self.dims(node.input[0])
            if dims is None or None in dims:
                return None
            return np.array(dims[a.get("start", 0):a.get("end", len(dims))], dtype=np.int64)
        if any(v is None for v in ins[:1]):
            return None
        x = ins[0]
        if op == "Identity":
            return x
        if op == "Cast":
            return x.astype(helper.tensor_dtype_to_np_dtype(a["to"]))
        if op == "CastLike":
            elem = self.elem(node.input[1])
            dt = ins[1].dtype if ins[1] is not None else helper.tensor_dtype_to_np_dtype(elem) if elem else None
            return x.astype(dt) if dt is not None else None
        if op in ("Unsqueeze", "Squeeze"):
            axes = a.get("axes") if self.opset < 13 else (ins[1].tolist() if len(ins) > 1 and ins[1] is not None
                                                          else None)
            if op == "Unsqueeze":
                if axes is None:
                    return None
                rank = x.ndim + len(axes)
                for ax in sorted(ax % rank for ax in axes):
                    x = np.expand_dims(x, ax)
                return x
            return np.squeeze(x, axis=None if axes is None else tuple(axes))
        if op == "Reshape":
            if ins[1] is None:
                return None
            shape = [int(s) for s in ins[1]]
            if not a.get("allowzero", 0):
                shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
            return x.reshape(shape)
        if op == "Expand":
            if ins[1] is None:
                return None
            shape = np.broadcast_shapes(x.shape, tuple(int(s) for s in ins[1]))
            return None if math.prod(shape) > _FOLD_LIMIT else np.broadcast_to(x, shape).copy()
        if op == "Concat":
            if any(v is None for v in ins):
                return None
            return np.concatenate(ins, axis=a["axis"])
        if op in _INT_MATHS and ins[1] is not None:
            if op == "Div" and np.result_type(x, ins[1]).kind == "f":
                return np.divide(x, ins[1]).astype(np.result_type(x, ins[1]))
            return _INT_MATHS[op](x, ins[1]).astype(np.result_type(x, ins[1]))
        return None

    def _gather(self, node, a: dict) -> np.ndarray | None:
        """Gather of a constant, or of Shape(v) at fixed indices where v's dims there are fixed (the last dim of
        a tensor whose batch and tokens are symbolic)."""
        idx = self.const(node.input[1])
        if idx is None:
            return None
        data = self.const(node.input[0])
        if data is None:
            shape = self.producer.get(node.input[0])
            dims = self.dims(shape.input[0]) if is_op(shape, "Shape") and a.get("axis", 0) == 0 else None
            if dims is None:
                return None
            sa = attrs(shape)
            dims = dims[sa.get("start", 0):sa.get("end", len(dims))]
            picked = [dims[int(i)] for i in idx.reshape(-1)]
            if any(not isinstance(d, int) for d in picked):
                return None
            return np.array(picked, np.int64).reshape(idx.shape)
        return np.take(data, idx.astype(np.int64), axis=a.get("axis", 0))


def every_node(g):
    """Every node of graph `g` and of the subgraphs it holds, at any depth."""
    for n in g.node:
        yield n
        for sub in subgraphs([n]):
            yield from every_node(sub)


def _every_subgraph(g):
    for n in g.node:
        for sub in subgraphs([n]):
            yield sub
            yield from _every_subgraph(sub)


def _every_name(g) -> set:
    names = {i.name for i in [*g.input, *g.output, *g.value_info]} | {t.name for t in g.initializer}
    for n in g.node:
        names.update(v for v in [*n.input, *n.output] if v)
        for sub in subgraphs([n]):
            names |= _every_name(sub)
    return names


# ---- types and shapes ------------------------------------------------------------------------------
def _stand_in(node, graph: Graph, probe_inputs: list) -> list | None:
    """ONNX nodes with the outputs `node` has, for the inference probe; None to keep `node`."""
    from onnx import helper

    key = (domain_of(node), node.op_type)
    if key == ("tritonforge", "BiasConcat"):  # the two streams joined on their sequence axis
        return [helper.make_node("Concat", list(node.input[:2]), [node.output[0]], axis=1)]
    if key == ("tritonforge", "Linear"):  # X by W: the bias and the GELU change no dim
        return [helper.make_node("MatMul", list(node.input[:2]), [node.output[0]])]
    if node.op_type == "BiasSplitGelu":  # half X's last dim: kept, its output's dims unknown (as ORT's own)
        return None
    if key in _SAME_AS_X or node.domain == "tritonforge":
        return [helper.make_node("Identity", [node.input[0]], [o]) for o in node.output if o]
    if key == (MS, "NhwcConv") and len(node.input) >= 2:
        # NhwcConv is Conv on NHWC data with (M, kH, kW, C/group) weights: the same conv between transposes.
        weight = graph.inits.get(node.input[1])
        if weight is None:
            return None
        w, x, out = list(weight.dims), node.input[0], node.output[0]
        w_nchw = f"{node.input[1]}__nchw_probe"
        probe_inputs.append(helper.make_tensor_value_info(w_nchw, weight.data_type, [w[0], w[-1], *w[1:-1]]))
        conv_in = [f"{x}__nchw_probe_{out}", w_nchw, *node.input[2:3]]
        kept = {k: v for k, v in attrs(node).items() if k != "channels_last"}
        return [helper.make_node("Transpose", [x], [conv_in[0]], perm=[0, len(w) - 1, *range(1, len(w) - 1)]),
                helper.make_node("Conv", conv_in, [f"{out}__nchw_probe"], **kept),
                helper.make_node("Transpose", [f"{out}__nchw_probe"], [out], perm=[0, *range(2, len(w)), 1])]
    return None


# ops whose integer results on constants the probe takes as constants (_constant_stand_ins)
_PROBE_FOLDS = {"Mod", "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Cast", "Identity", "Reshape", "Unsqueeze",
                "Squeeze", "Concat", "Gather", "Slice"}


def _small_value(node):
    """The TensorProto of a Constant node whose value is small and held in the model, else None."""
    if node.op_type != "Constant" or domain_of(node) != "" or not node.output:
        return None
    value = attrs(node).get("value")
    return value if value is not None and math.prod(value.dims) <= _SMALL and not value.external_data else None


def _constant_stand_ins(nodes: list, initializers, opsets) -> list:
    """`nodes` with each one of _PROBE_FOLDS whose inputs are all constants (Constant nodes, small initializers,
    or what this folded before it) and whose outputs are small integer tensors replaced by Constant nodes of the
    values onnx's reference implementation computes: ONNX inference's data propagation then sees the Slice bounds
    and Reshape shapes they feed. The probe only; the model keeps its nodes. `opsets`: the model's imports, which
    fix what each op means (Unsqueeze's axes an attribute before opset 13, an input after)."""
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    known = {t.name: t for t in initializers if math.prod(t.dims) <= _SMALL}
    out = []
    for n in nodes:
        value = _small_value(n)
        if value is not None:
            known[n.output[0]] = onnx.TensorProto()
            known[n.output[0]].CopyFrom(value)
            known[n.output[0]].name = n.output[0]  # an initializer of the one-node graph
        elif (n.op_type in _PROBE_FOLDS and domain_of(n) == "" and n.input and not any(subgraphs([n]))
              and all(i in known for i in n.input if i)):
            try:
                values = ReferenceEvaluator(helper.make_model(
                    helper.make_graph([n], "fold", [], [helper.make_tensor_value_info(o, 0, None) for o in n.output],
                                      [known[i] for i in {i for i in n.input if i}]),
                    opset_imports=list(opsets))).run(None, {})
            except Exception:  # a form the reference does not take keeps its node
                values = None
            if values and all(np.asarray(v).dtype.kind in "iu" and np.asarray(v).size <= _SMALL for v in values):
                for o, v in zip(n.output, values):
                    known[o] = numpy_helper.from_array(np.asarray(v), o)
                out.extend(helper.make_node("Constant", [], [o], value=known[o]) for o in n.output)
                continue
        out.append(n)
    return out


def _inferred(probe) -> tuple[dict, dict]:
    """(element type, dims) of every value ONNX inference with data propagation reaches in `probe`, and the same
    dims with their symbols (a dim_param's name where no value is known)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(probe, data_prop=True).graph
    except Exception:  # a graph inference cannot read still has the types it declares
        inferred = probe.graph
    types: dict[str, tuple[int, list | None]] = {}
    symbols: dict[str, list] = {}
    for scope in (inferred, *_every_subgraph(inferred)):  # names are unique across scopes (ONNX IR 4+)
        for vi in [*scope.input, *scope.value_info, *scope.output]:
            t = vi.type.tensor_type
            dims = ([d.dim_value if d.HasField("dim_value") else d.dim_param or None for d in t.shape.dim]
                    if t.HasField("shape") else None)
            if (t.elem_type or dims is not None) and vi.name not in types:
                types[vi.name] = (t.elem_type, None if dims is None else [d if isinstance(d, int) else None
                                                                         for d in dims])
                if dims is not None:
                    symbols[vi.name] = dims
    return types, symbols


def _target_stand_ins(nodes: list, graph: Graph, types: dict) -> list | None:
    """`nodes` with each part of a Reshape's target (the Concat's inputs) that Graph.const folds once the first
    inference's shapes are known made a Constant: a head width TorchScript computes as `Shape(k)[-1] // heads`,
    whose Div ONNX's data propagation does not evaluate. None where there is none."""
    from onnx import helper, numpy_helper

    graph.types = types  # the first pass's, for const() to fold Shape; forgotten below
    try:
        folded = {}
        for n in graph.nodes:
            concat = graph.producer.get(n.input[1]) if n.op_type == "Reshape" and len(n.input) == 2 else None
            for piece in concat.input if is_op(concat, "Concat") else ():
                made = graph.producer.get(piece)
                if made is not None and made.op_type != "Constant" and len(made.output) == 1:
                    value = graph.const(piece)
                    if value is not None and value.dtype.kind in "iu":
                        folded[piece] = value
    finally:
        graph.reindex()
    if not folded:
        return None
    return [helper.make_node("Constant", [], [n.output[0]], value=numpy_helper.from_array(folded[n.output[0]]))
            if len(n.output) == 1 and n.output[0] in folded else n for n in nodes]


def _split_reshapes(nodes: list, symbols: dict) -> list | None:
    """`nodes` with each Reshape whose target's one -1 its input's dims fix reading that target with the -1 worked
    out: inference cannot divide symbolic dims, so `view(batch, -1, heads, head_dim)` and `unflatten(-1, (heads,
    -1))` under a symbolic batch leave the tokens or the head width unknown past them. A target qualifies when it
    is a Concat of constants and of the input's own dims (Shape sliced or gathered, of any value with the same
    symbols), and the input's dims that no such part names are known. None where there is none."""
    from onnx import helper, numpy_helper

    producer = {o: n for n in nodes for o in n.output if o}
    const = {n.output[0]: numpy_helper.to_array(v) for n in nodes if (v := _small_value(n)) is not None}
    out, changed = [], False
    for n in nodes:
        found = _split_target(n, producer, const, symbols) if n.op_type == "Reshape" else None
        if found is None:
            out.append(n)
            continue
        concat, at, value = producer[n.input[1]], *found
        name = f"{n.output[0]}__probe_target"
        parts = [f"{name}_{at}" if k == at else p for k, p in enumerate(concat.input)]
        out += [helper.make_node("Constant", [], [f"{name}_{at}"], value=numpy_helper.from_array(value)),
                helper.make_node("Concat", parts, [name], axis=0),
                helper.make_node("Reshape", [n.input[0], name], list(n.output))]
        changed = True
    return out if changed else None


def _shape_part(value: str, producer: dict, const: dict, symbols: dict) -> list | None:
    """The dims (ints or symbols) a part of a Reshape's target takes from a Shape: Slice(Shape(y)) along its one
    axis, or Unsqueeze(Gather(Shape(y), i)); else None."""
    node = producer.get(value)
    if is_op(node, "Unsqueeze"):
        node = producer.get(node.input[0])
        if not is_op(node, "Gather") or attrs(node).get("axis", 0) != 0:
            return None
        shape, idx = producer.get(node.input[0]), const.get(node.input[1])
        picked = None if idx is None or idx.size != 1 else [int(idx.reshape(-1)[0])]
    elif is_op(node, "Slice") and len(node.input) in (3, 4):
        shape, bounds = producer.get(node.input[0]), [const.get(i) for i in node.input[1:]]
        if any(b is None or b.size != 1 for b in bounds) or (len(bounds) == 3 and int(bounds[2].reshape(-1)[0])):
            return None
        picked = [int(bounds[0].reshape(-1)[0]), int(bounds[1].reshape(-1)[0])]
    else:
        return None
    dims = symbols.get(shape.input[0]) if is_op(shape, "Shape") and not attrs(shape) else None
    if dims is None or picked is None:
        return None
    return [dims[picked[0]]] if len(picked) == 1 else dims[slice(*picked)]


def _split_target(node, producer: dict, const: dict, symbols: dict) -> tuple[int, np.ndarray] | None:
    """(the Concat input holding the -1, its value with the -1 worked out) where Reshape `node`'s target
    qualifies (_split_reshapes); else None."""
    concat = producer.get(node.input[1]) if len(node.input) == 2 else None
    dims = symbols.get(node.input[0])
    if not is_op(concat, "Concat") or attrs(node).get("allowzero", 0) or dims is None:
        return None
    named, known, at = [], [], None
    for k, p in enumerate(concat.input):
        if p in const:
            values = [int(v) for v in const[p].reshape(-1)]
            known += [v for v in values if v != -1]
            if -1 in values:
                if at is not None:  # one -1 in all
                    return None
                at = k
            continue
        part = _shape_part(p, producer, const, symbols)
        if part is None or None in part:
            return None
        named += [d for d in part if isinstance(d, str)]
        known += [d for d in part if isinstance(d, int)]
    left = list(dims)
    for d in named:  # each symbolic part is one of the input's own dims
        if d not in left:
            return None
        left.remove(d)
    if at is None or 0 in known or any(not isinstance(d, int) for d in left):
        return None
    total, have = math.prod(left), math.prod(known)
    if not have or total % have:
        return None
    value = const[concat.input[at]].copy()
    value[value == -1] = total // have
    return at, value


def _infer(model, graph: Graph) -> dict[str, tuple[int, list | None]]:
    import onnx
    from onnx import helper

    g = model.graph
    probe = onnx.ModelProto()
    probe.ir_version = model.ir_version
    probe.opset_import.extend(model.opset_import)
    pg = probe.graph
    pg.name = g.name
    inputs = list(g.input)
    declared = {i.name for i in inputs}
    for t in g.initializer:
        small = math.prod(t.dims) <= _SMALL
        if small and t.data_location != onnx.TensorProto.EXTERNAL:
            pg.initializer.append(t)
        elif small:
            from onnx import numpy_helper

            pg.initializer.append(numpy_helper.from_array(graph.init_array(t), t.name))
        elif t.name not in declared:
            inputs.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    nodes = []
    for n in g.node:
        instead = _stand_in(n, graph, inputs)
        nodes.extend(instead if instead is not None else [n])
    # Node order may not survive a stand-in's new names; inference wants them in order, as they are.
    nodes = _constant_stand_ins(nodes, pg.initializer, model.opset_import)
    pg.node.extend(nodes)
    pg.input.extend(inputs)
    pg.output.extend(g.output)
    pg.value_info.extend(g.value_info)

    def again(changed: list) -> tuple[dict, dict]:  # the probe's nodes replaced, inference run again
        del pg.node[:]
        pg.node.extend(changed)
        return _inferred(probe)

    types, symbols = _inferred(probe)
    pieces = _target_stand_ins(nodes, graph, types)
    if pieces is not None:  # once more, for the symbols past the parts worked out
        nodes = pieces
        types, symbols = again(nodes)
    for _ in range(3):  # a split's dims reach the reshape that joins the heads again only on the next round
        split = _split_reshapes(nodes, symbols)
        if split is None:
            break
        nodes = split
        types, symbols = again(nodes)
    for scope in (g, *_every_subgraph(g)):
        for t in scope.initializer:
            types[t.name] = (t.data_type, list(t.dims))
    for n in every_node(g):  # element types past what inference reached
        if n.op_type in _KEEPS_TYPE and n.input and n.output and n.output[0] and not types.get(n.output[0], (0,))[0]:
            elem = types.get(n.input[0], (0, None))[0]
            if elem:
                types[n.output[0]] = (elem, types.get(n.output[0], (0, None))[1])
    return types
