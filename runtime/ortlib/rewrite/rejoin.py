"""A Concat of Slices that cover one tensor in order is that tensor: its readers read the tensor instead.

Flux's single blocks run on the text and image tokens together: each block concatenates the two streams, and
the next slices its output back into them, so between two blocks the stream passes through two Slices and a
Concat that give back what they were given, three copies of the widest tensor for nothing, 37 times a step.
ORT's optimizer keeps them. Taken away, the next block's norm reads the sum it follows, which is what the
AdaLayerNorm matcher needs to take the gated residual with it (ada_layer_norm.py). Exact: no arithmetic
changes, so nothing is measured for it.

The Slices must be along the Concat's axis, with step 1, the first from 0, each next from where the one before
ended (the same constant or the same value), the last to the end (INT64_MAX, or the dim where inference knows
it). A Slice that something else reads stays for that reader.
"""

from __future__ import annotations

from .graph import Graph, attrs, every_node, is_op

_TO_THE_END = 1 << 62  # ends at least this large: "to the end", as torch.onnx writes [a:]


def _span(g: Graph, s, rank: int | None) -> tuple[object, object, int] | None:
    """(start, end, axis) of a Slice of one axis with step 1: start and end as ints where the model fixes them,
    else as the value names that give them; None for any other Slice."""
    if len(s.input) < 3:  # opset < 10: starts, ends and axes are attributes
        a = attrs(s)
        starts, ends, axes = a.get("starts"), a.get("ends"), a.get("axes")
        if starts is None or len(starts) != 1 or axes is None or len(axes) != 1:
            return None
        start, end, axis = int(starts[0]), int(ends[0]), int(axes[0])
    else:
        if len(s.input) < 4 or not s.input[3]:
            return None
        axes = g.const(s.input[3])
        steps = g.const(s.input[4]) if len(s.input) > 4 and s.input[4] else None
        if axes is None or axes.size != 1 or steps is not None and (steps.size != 1 or int(steps.reshape(-1)[0]) != 1):
            return None
        bounds = []
        for name in s.input[1:3]:
            v = g.const(name)
            if v is not None and v.size != 1:
                return None
            bounds.append(int(v.reshape(-1)[0]) if v is not None else name)
        start, end = bounds
        axis = int(axes.reshape(-1)[0])
    if axis < 0:
        if rank is None:
            return None
        axis += rank
    return start, end, axis


def _covers(g: Graph, concat, slices) -> str | None:
    """The tensor `slices` (the Concat's inputs, in order) cover whole along the Concat's axis, or None."""
    src = slices[0].input[0]
    dims = g.dims(src)
    rank = len(dims) if dims is not None else None
    axis = attrs(concat).get("axis")
    if axis is None or any(s.input[0] != src for s in slices):
        return None
    if axis < 0:
        if rank is None:
            return None
        axis += rank
    spans = [_span(g, s, rank) for s in slices]
    if any(sp is None or sp[2] != axis for sp in spans) or spans[0][0] != 0:
        return None
    for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
        if end != start or isinstance(start, int) and start < 0:
            return None
    last = spans[-1][1]
    whole = dims[axis] if dims is not None else None
    if not isinstance(last, int) or not (last >= _TO_THE_END or isinstance(whole, int) and last == whole):
        return None
    return src


def rejoin(graph: Graph) -> int:
    """Make every reader of such a Concat (in the main graph and its subgraphs) read the tensor it rejoins, and drop
    the Concat and the Slices nothing else reads; how many Concats went. The caller reindexes the graph."""
    g = graph
    instead: dict[str, str] = {}
    gone: set[int] = set()
    for node in g.nodes:
        if not is_op(node, "Concat") or len(node.input) < 2 or node.output[0] in g.outputs:
            continue
        slices = [g.producer.get(i) for i in node.input]
        if not all(is_op(s, "Slice") for s in slices):
            continue
        src = _covers(g, node, slices)
        if src is None:
            continue
        instead[node.output[0]] = instead.get(src, src)
        gone.add(id(node))
        gone.update(id(s) for s in slices if all(id(c) == id(node) for c in g.consumers.get(s.output[0], []))
                    and s.output[0] not in g.outputs)
    if not instead:
        return 0
    for node in every_node(g.scope):
        for i, name in enumerate(node.input):
            if name in instead:
                node.input[i] = instead[name]
    kept = [n for n in g.scope.node if id(n) not in gone]
    del g.scope.node[:]
    g.scope.node.extend(kept)
    return len(instead)
