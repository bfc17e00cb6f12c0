"""What makes a MatMul a Linear the library's Linear can take (linear.py writes it; gelu.py asks first whether the
Linear will take the GELU after it): the MatMul by a 2-D weight, its bias, and the measured choice per dtype and
epilogue."""

from __future__ import annotations

from . import choices
from .graph import MS, domain_of, is_op
from .patterns import Left, Rewriter, bias_add

FORMS = {"none": "bias", "gelu_tanh": "GELU-tanh"}


def linear_parts(g, mm):
    """(x, W, b's name, b, the node adding b, Shapes) of a Linear in its MatMul `mm` (see the module's text), else
    None. The node adding b is the bias Add, or ORT's FastGelu with the bias (what ORT's optimizer writes)."""
    if not is_op(mm, "MatMul") or len(mm.input) != 2:
        return None
    x, w = mm.input
    wd, xd = g.dims(w), g.dims(x)
    if not wd or len(wd) != 2 or not all(isinstance(d, int) for d in wd) or not xd or len(xd) < 2:
        return None
    out = mm.output[0]
    readers = g.consumers.get(out, [])
    tails = [n for n in readers if is_op(n, "Add") or _fast_gelu_with_bias(n, out)]
    shapes = [n for n in readers if is_op(n, "Shape")]
    if out in g.outputs or len(tails) != 1 or len(tails) + len(shapes) != len(readers):
        return None
    tail = tails[0]
    if is_op(tail, "Add"):
        found = bias_add(g, tail.output[0], g.consumers.get(tail.output[0], []))
        if found is None or found[0] != out:
            return None
        _, b_name, b, _ = found
    else:
        b_name, b = tail.input[1], g.const(tail.input[1])
    if b is None or b.size != wd[1] or b.shape[-1] != b.size:
        return None
    return x, w, b_name, b, tail, shapes


def _fast_gelu_with_bias(node, x: str) -> bool:
    return domain_of(node) == MS and node.op_type == "FastGelu" and list(node.input)[:1] == [x] and len(
        [i for i in node.input if i]) == 2


def measured(r: Rewriter, x: str, activation: str, at=None) -> str:
    """X's dtype where the library's Linear measured faster than the export's nodes with this epilogue and the
    library serves it; Left naming the reason otherwise. `at`: the Linear's MatMul, where it is not the node being
    matched (its site's measured verdict decides)."""
    dtype = r.dtype(x)
    if dtype is None:
        raise Left("X's element type is not known")
    r.check_served("Linear", dtype)
    chosen = r.choice(at)
    if chosen is not None:
        chosen.take()
        return dtype
    measured = choices.table("linear")
    speedup, device = measured.speedup.get(dtype, {}).get(activation), measured.devices.get(dtype, measured.device)
    if speedup is None:
        raise Left(f"the library's Linear ({FORMS[activation]} epilogue) was not measured in {dtype} on {device}: "
                   "the export's nodes kept")
    if speedup < 1:
        raise Left(f"the export's nodes measured faster than the library's Linear ({speedup:.2f}x, "
                   f"{FORMS[activation]} epilogue, {dtype}, {device})")
    return dtype


def linear_takes(r: Rewriter, x: str, activation: str) -> bool:
    """Whether the Linear matcher will take the Linear whose bias Add makes `x`, with `activation` after it (the GELU
    matchers leave that GELU to it)."""
    g = r.graph
    add = g.producer.get(x)
    if not is_op(add, "Add"):
        return False
    for i in add.input:
        mm = g.producer.get(i)
        parts = linear_parts(g, mm)
        if parts and parts[4] is add:
            try:
                measured(r, parts[0], activation, at=mm)
                return True
            except Left:
                return False
    return False
