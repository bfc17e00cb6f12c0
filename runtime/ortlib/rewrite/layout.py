"""Channels-last GroupNorms, for sessions that prefer NHWC (`tritonforge_ort.session` sets `prefer_nhwc`).

With `prefer_nhwc`, ORT's CUDA EP runs its convolutions in NHWC: its layout transformer wraps each Conv in
Transposes (NCHW -> NHWC before, back after) and its transpose optimizer cancels the pairs that meet. A
library op that reads NCHW sits between two such Transposes, so every GroupNorm of a UNet or VAE costs a
layout conversion before and after it. Written channels-last instead, each
tritonforge.GroupNormalization on (N, C, H, W) becomes

    Transpose [0, 2, 3, 1] -> tritonforge.GroupNorm (NHWC; groups, epsilon, activation) -> Transpose [0, 3, 1, 2]

whose Transposes are the inverses of the ones ORT puts around the convolutions beside it: ORT's
transpose optimizer cancels them, through the element-wise ops between (residual Adds), and the
GroupNorm joins the convolutions' layout. Where nothing cancels them (a session without `prefer_nhwc`,
the CPU EP) they are real copies: the layout is the caller's choice (`rewrite(..., layout="nhwc")`).
A GroupNormalization of another rank, or of a type the library's NHWC op does not serve on CUDA, stays
NCHW and is named; those inside If branches and Loop and Scan bodies are taken the same way.
"""

from __future__ import annotations

from .. import DOMAIN
from .graph import FLOAT_TYPES, Graph, attrs, named_subgraphs

TO_NHWC = [0, 2, 3, 1]
TO_NCHW = [0, 3, 1, 2]


def _stays_nchw(g, n, cuda: dict | None) -> str | None:
    """Why the GroupNormalization `n` cannot run channels-last, or None when it can."""
    dims = g.dims(n.input[0])
    if dims is None:
        return "its input's rank is unknown"
    if len(dims) != 4:
        return f"its input has rank {len(dims)}"
    dtype = FLOAT_TYPES.get(g.elem(n.input[0]))
    if cuda is not None and dtype not in cuda.get("GroupNorm", ()):
        return f"the library's NHWC GroupNorm has no CUDA kernels for {dtype}"
    return None


def _nhwc(g, n) -> list:
    """`n` as Transpose -> tritonforge.GroupNorm -> Transpose, writing the values it wrote."""
    from onnx import helper

    a = attrs(n)
    base = n.name or n.output[0]
    x_nhwc, y_nhwc = g.unique(f"{n.input[0]}_nhwc"), g.unique(f"{n.output[0]}_nhwc")
    return [helper.make_node("Transpose", [n.input[0]], [x_nhwc], name=g.unique(f"{base}_to_nhwc"), perm=TO_NHWC),
            helper.make_node("GroupNorm", [x_nhwc, n.input[1], n.input[2]], [y_nhwc], name=n.name, domain=DOMAIN,
                             groups=int(a["num_groups"]), epsilon=float(a.get("epsilon", 1e-5)),
                             activation=int(a.get("activation", 0))),
            helper.make_node("Transpose", [y_nhwc], [n.output[0]], name=g.unique(f"{base}_to_nchw"), perm=TO_NCHW)]


def channels_last(g, cuda: dict | None) -> tuple[int, list[str]]:
    """Every 4-D tritonforge.GroupNormalization of the graph `g` (rewrite.graph.Graph) as tritonforge.GroupNorm
    between Transposes, in place. `cuda`: the library's CUDA dtypes per op (None: any). Returns (how many
    were written channels-last, why each other one was not)."""
    out, done, kept = [], 0, []
    for n in g.scope.node:
        for attr, sub in named_subgraphs(n):  # If branches, Loop and Scan bodies: the same, each named where
            inner = Graph(g.model, g.base_dir, sub, g, f" in the {attr} of {n.op_type} node '{n.name}'{g.where}")
            d, k = channels_last(inner, cuda)
            done, kept = done + d, kept + k
        why = _stays_nchw(g, n, cuda) if n.domain == DOMAIN and n.op_type == "GroupNormalization" else ""
        if why is None:
            out += _nhwc(g, n)
            done += 1
            continue
        if why:
            kept.append(f"GroupNormalization node '{n.name or n.output[0]}'{g.where} stays NCHW: {why}")
        out.append(n)
    del g.scope.node[:]
    g.scope.node.extend(out)
    return done, kept
