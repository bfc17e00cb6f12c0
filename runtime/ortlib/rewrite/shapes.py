"""A Shape of a Linear's `MatMul + bias` reads the MatMul: the bias changes no dim.

The TorchScript exporter with dynamic axes computes a head split's target shape from the projection itself,
`Shape(Add(MatMul(x, W), b))`. That Shape is a second reader of the Add, and keeps the bias a node of its own
where a fused op would take it (SD3's joint attention key: attention.py's BiasConcat). Where b is a constant
with one value per last-axis element, the Add's shape is the MatMul's, so the Shape reads the MatMul instead.
Exact: no value changes, so nothing is measured for it.
"""

from __future__ import annotations

from .graph import Graph, is_op


def _bias_of(g: Graph, add) -> str | None:
    """The MatMul output `add` adds a per-last-axis constant to, else None."""
    for i, j in ((0, 1), (1, 0)):
        y, b = add.input[i], g.const(add.input[j])
        dims = g.dims(y)
        if (b is not None and b.ndim == 1 and b.size > 1 and is_op(g.producer.get(y), "MatMul") and dims
                and dims[-1] == b.size):
            return y
    return None


def shapes_past_bias(graph: Graph) -> int:
    """Point every Shape of such an Add at its MatMul; how many were. The caller reindexes the graph."""
    g, moved = graph, 0
    for node in g.nodes:
        if not is_op(node, "Shape") or not node.input:
            continue
        add = g.producer.get(node.input[0])
        y = _bias_of(g, add) if is_op(add, "Add") else None
        if y is not None:
            node.input[0] = y
            moved += 1
    return moved
