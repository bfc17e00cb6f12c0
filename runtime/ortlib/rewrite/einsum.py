"""An Einsum that only permutes its one input's axes, in bfloat16, as the Transpose it is.

The diffusion transformers unpatchify their output with `torch.einsum("nhwpqc->nchpwq", x)` (SD3, SD3.5,
PixArt), which the dynamo exporter writes as ONNX Einsum. Einsum has no bfloat16 in ONNX's schemas (opset 12 to
23), so onnxruntime refuses a bfloat16 export with that node before it runs anything. A one-input equation
whose output names each input axis once, no ellipsis, is a Transpose by the output's order of the input's axes,
which every type has. Written for bfloat16 only, where the export's node cannot run at all; in other types
the Einsum stays as exported (not measured against Transpose).
"""

from __future__ import annotations

from .graph import attrs, is_op
from .patterns import Match, Rewriter


def permutation(equation: str) -> list[int] | None:
    """The axes' order where `equation` ("nhwpqc->nchpwq") only permutes one input's axes, else None."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    if not arrow or "," in lhs or "." in equation or len(set(lhs)) != len(lhs) or sorted(lhs) != sorted(rhs):
        return None
    return [lhs.index(axis) for axis in rhs]


class PermutingEinsum:
    """Einsum(x) of a permuting equation, x bfloat16, as Transpose(x, perm) (see the module's text)."""

    anchors = {("", "Einsum")}
    source = "Einsum that permutes its input's axes (bfloat16, which Einsum does not take)"

    def match(self, r: Rewriter, node):
        from onnx import helper

        equation = attrs(node).get("equation", b"")
        perm = permutation(equation.decode() if isinstance(equation, bytes) else equation)
        if not is_op(node, "Einsum") or len(node.input) != 1 or perm is None or r.dtype(node.input[0]) != "bf16":
            return None
        transpose = helper.make_node("Transpose", [node.input[0]], [node.output[0]],
                                     name=node.name or r.node_name(node.output[0]), perm=perm)  # in its place
        return Match([node], transpose, self.source, dtype="bf16")


EINSUM = (PermutingEinsum(),)
