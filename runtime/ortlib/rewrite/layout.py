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
NCHW and is named.
"""

from __future__ import annotations

from .. import DOMAIN
from .graph import FLOAT_TYPES, attrs

TO_NHWC = [0, 2, 3, 1]
TO_NCHW = [0, 3, 1, 2]


def channels_last(g, cuda: dict | None) -> tuple[int, list[str]]:
    """Every 4-D tritonforge.GroupNormalization of the graph `g` (rewrite.graph.Graph) as tritonforge.GroupNorm
    between Transposes, in place. `cuda`: the library's CUDA dtypes per op (None: any). Returns (how many
    were written channels-last, why each other one was not)."""
    from onnx import helper

    nodes = g.scope.node
    done, kept = 0, []
    i = 0
    while i < len(nodes):
        n = nodes[i]
        if n.domain != DOMAIN or n.op_type != "GroupNormalization":
            i += 1
            continue
        dims = g.dims(n.input[0])
        dtype = FLOAT_TYPES.get(g.elem(n.input[0]))
        if dims is None or len(dims) != 4:
            why = f"its input has rank {len(dims)}" if dims is not None else "its input's rank is unknown"
        elif cuda is not None and dtype not in cuda.get("GroupNorm", ()):
            why = f"the library's NHWC GroupNorm has no CUDA kernels for {dtype}"
        else:
            why = None
        if why:
            kept.append(f"GroupNormalization node '{n.name or n.output[0]}' stays NCHW: {why}")
            i += 1
            continue
        a = attrs(n)
        base = n.name or n.output[0]
        x_nhwc, y_nhwc = g.unique(f"{n.input[0]}_nhwc"), g.unique(f"{n.output[0]}_nhwc")
        new = [helper.make_node("Transpose", [n.input[0]], [x_nhwc], name=g.unique(f"{base}_to_nhwc"), perm=TO_NHWC),
               helper.make_node("GroupNorm", [x_nhwc, n.input[1], n.input[2]], [y_nhwc], name=n.name, domain=DOMAIN,
                                groups=int(a["num_groups"]), epsilon=float(a.get("epsilon", 1e-5)),
                                activation=int(a.get("activation", 0))),
               helper.make_node("Transpose", [y_nhwc], [n.output[0]], name=g.unique(f"{base}_to_nchw"), perm=TO_NCHW)]
        del nodes[i]
        for k, m in enumerate(new):
            nodes.insert(i + k, m)
        i += len(new)
        done += 1
    return done, kept
