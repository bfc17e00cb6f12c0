"""A Linear with its bias, and the GELU-tanh after it, as one node: the library's `tritonforge.Linear`.

Both torch.onnx exporters write a Linear of a 3-D activation as `MatMul(x, W)` by a (K, N) weight and an `Add` of
its bias. ORT runs that as a GEMM and a pass of its own that adds the bias to the whole output (its Gemm broadcasts
the bias into the output first), and a GELU after it as one more pass (ORT's FastGelu, where gelu.py writes it).
cuBLASLt adds the bias, and applies GELU-tanh, in the GEMM's epilogue, as torch's Linear does: the library's Linear
is that one call. The form, anchored at the MatMul:

- `MatMul(x, W)` with W of two known dims (K, N), read by one `Add(mm, b)` alone (and by Shapes, which shapes.py
  points there: they read the Linear's output after), b a constant of N values;
- optionally GELU-tanh of that Add, as gelu.py finds it (TorchScript's decomposition or ONNX Gelu(approximate=
  "tanh")), read by nothing else.

Linears run last: the fusions that take a Linear's bias into a node of their own (SkipLayerNormalization, BiasSplitGelu,
BiasConcat, attention's projections) are tried first, and a Linear one of them took stays theirs. Where it goes is the
measured choice (choices.json's `linear` table, derived from the committed rows by benchmarks/choices.py), per dtype and
epilogue: one without rows, or whose node did not measure faster than ORT running the export's nodes, keeps them, and
the report says why.
"""

from __future__ import annotations

from .. import DOMAIN
from .gelu import OnnxGelu, TanhGeluDecomposed
from .graph import is_op
from .linear_form import linear_parts, measured
from .patterns import Left, Match, Rewriter, bias_input


def _gelu_after(r: Rewriter, value: str):
    """(the GELU's output, its nodes) where `value` goes through GELU-tanh alone (gelu.py's forms), else None."""
    g = r.graph
    readers = g.consumers.get(value, [])
    if len(readers) == 1 and is_op(readers[0], "Gelu"):
        found = OnnxGelu.find(r, readers[0])
        return found[1:] if found else None
    # the decomposition's Tanh is three nodes from x: x -> cube -> (x + 0.044715 x^3) -> * sqrt(2/pi) -> Tanh
    seen, frontier = set(), list(readers)
    for _ in range(5):
        tanh = next((n for n in frontier if is_op(n, "Tanh")), None)
        if tanh is not None:
            try:
                found = TanhGeluDecomposed().find(r, tanh)
            except Left:
                return None
            return found[1:] if found and found[0] == value else None
        seen |= {id(n) for n in frontier}
        frontier = [c for n in frontier for o in n.output for c in g.consumers.get(o, []) if id(c) not in seen]
    return None


class LinearBias:
    """MatMul + bias Add (+ GELU-tanh) as one tritonforge.Linear (see the module's text), anchored at the MatMul."""

    anchors = {("", "MatMul")}
    source = "MatMul + bias Add"
    late = True  # after the fusions that take a Linear's bias themselves

    def match(self, r: Rewriter, mm):
        from onnx import helper

        g = r.graph
        parts = linear_parts(g, mm)
        if parts is None:
            return None
        x, w, b_name, b, add, shapes = parts
        out, removed, activation = add.output[0], [mm, add], "none" if is_op(add, "Add") else "gelu_tanh"
        gelu = _gelu_after(r, out) if activation == "none" else None
        if gelu is not None:
            activation = "gelu_tanh"
            out, nodes = gelu
            removed += nodes
        if any(id(n) in r.taken for n in (*removed, *shapes)):
            return None  # an earlier fusion took this Linear's bias (or its GELU) on purpose
        try:
            measured(r, x, activation)
        except Left as why:
            try:  # the GELU epilogue unmeasured: the bias alone, the GELU's nodes kept after the node
                if not gelu:
                    raise
                measured(r, x, "none")
                out, removed, activation, gelu = add.output[0], [mm, add], "none", None
            except Left:  # one line for all a model's Linears, not one per node
                r.notes[str(why)] += 1
                return None
        name = r.node_name((mm.name or out).rsplit("/", 1)[0] + "/Linear")
        node = helper.make_node("Linear", [x, w, bias_input(r, b_name, b)], [out], name=name, domain=DOMAIN,
                                activation=activation)
        # the Shapes read the Linear's output: it has the MatMul's shape (with the GELU, too)
        after = [helper.make_node("Shape", [out], list(s.output),
                                  name=s.name, **{a.name: helper.get_attribute_value(a) for a in s.attribute})
                 for s in shapes]
        source = (self.source + " + GELU-tanh" if gelu else self.source if activation == "none"
                  else "MatMul + ORT's FastGelu with the bias")
        return Match([*removed, *shapes], node, source, after=after)


LINEAR = (LinearBias(),)
