"""Whether a value added to attention scores is a causal mask: 0 where a query may see a key (key <= query), a large
negative number where it may not, and nothing but the shapes of the model's inputs deciding it.

CLIP's text encoder (and every decoder-only model torch.onnx exports) builds that mask at run time from the input's
shape (Range, Less, Where, Expand, Slice...), then adds it to every layer's scores. The value is read here by
running the nodes that make it in onnx's reference evaluator, at two sizes of every dimension the model leaves
free, with inputs of zeros: a mask that reads an input's values (a padding mask) is not this, and is refused.
"""

from __future__ import annotations

import numpy as np

MOST_NODES = 300  # a mask is a few dozen nodes; past this it is not worth reading
BLOCKED = -1e4  # at or below this an added value masks the key (fp16's -65504, fp32's -3.4e38, -inf)


def why_not_causal(g, value: str) -> str | None:
    """None when `value` (in graph `g`, a rewrite Graph) is an additive causal mask over its last two axes, made
    from input shapes only; otherwise why it is not."""
    from onnx import TensorProto, helper, numpy_helper

    fixed = g.const(value)
    if fixed is not None:
        return _why_not(np.asarray(fixed, np.float64))
    if g.outer is not None:
        return "it is computed inside a subgraph"
    nodes, taken, inputs, shaped, seen, todo = [], set(), set(), {}, set(), [value]
    inits = {t.name for t in g.model.graph.initializer}
    graph_inputs = {i.name for i in g.model.graph.input} - inits
    while todo:
        v = todo.pop()
        if v in seen or not v or v in inits:
            continue
        seen.add(v)
        if v in graph_inputs:
            return f"it reads the values of input '{v}' (a padding mask?)"
        node = g.producer.get(v)
        if node is None:
            continue
        if node.op_type == "Shape":  # only the shape of what it reads matters: that value becomes an input
            x = node.input[0]
            if x in graph_inputs:
                inputs.add(x)
            elif g.dims(x) is None or g.elem(x) is None:
                return f"the shape of '{x}' it reads is not known"
            else:
                shaped[x] = g.dims(x)
        else:
            todo.extend(node.input)
        if id(node) not in taken:
            taken.add(id(node))
            nodes.append(node)
        if len(nodes) > MOST_NODES:
            return f"it takes more than {MOST_NODES} nodes to make"
    order = {id(n): i for i, n in enumerate(g.model.graph.node)}
    if taken - set(order):
        return "its nodes are not all in the main graph"
    nodes.sort(key=lambda n: order[id(n)])
    used = {i for n in nodes for i in n.input}
    consts = [t for t in g.model.graph.initializer if t.name in used]
    ins = [i for i in g.model.graph.input if i.name in inputs]
    ins += [helper.make_tensor_value_info(x, g.elem(x), [d if isinstance(d, int) else None for d in dims])
            for x, dims in shaped.items()]
    free = any(not d.HasField("dim_value") for i in ins for d in i.type.tensor_type.shape.dim)
    model = helper.make_model(
        helper.make_graph(nodes, "mask", ins, [helper.make_tensor_value_info(value, TensorProto.UNDEFINED, None)],
                          [numpy_helper.from_array(numpy_helper.to_array(t), t.name) for t in consts]),
        opset_imports=list(g.model.opset_import))
    from onnx.reference import ReferenceEvaluator

    for n in (3, 5) if free else (0,):
        feeds = {}
        for i in ins:
            shape = [d.dim_value if d.HasField("dim_value") else n for d in i.type.tensor_type.shape.dim]
            feeds[i.name] = np.zeros(shape, helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
        try:
            mask = np.asarray(ReferenceEvaluator(model).run(None, feeds)[0], np.float64)
        except Exception as exc:  # the reference evaluator's errors share no base class
            return f"it could not be evaluated ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
        why = _why_not(mask)
        if why:
            return why
    return None


def _why_not(mask: np.ndarray) -> str | None:
    """Why `mask`'s values are not a causal mask over its last two axes, or None."""
    if mask.ndim < 2 or mask.shape[-1] != mask.shape[-2] or mask.shape[-1] < 2:
        return f"it is not square over its last two axes (shape {list(mask.shape)})"
    lower = np.tril(np.ones(mask.shape[-2:], bool))
    if not (np.all(mask[..., lower] == 0) and np.all(mask[..., ~lower] <= BLOCKED)):
        return "its values are not 0 on and below the diagonal and masking above it"
    return None
