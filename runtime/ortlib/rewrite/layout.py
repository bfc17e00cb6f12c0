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

A ResNet block adds its time embedding to the first convolution's output just before its second norm
(`h + temb[:, :, None, None]`: an Add of (N, C, H, W) and (N, C, 1, 1) read by the norm alone). That Add
goes into the norm, as ORT's own Stable Diffusion fusion writes it: tritonforge.SkipGroupNorm with the
(N, C) term as a skip broadcast over H*W, one kernel instead of a broadcast Add and the norm. It is taken
where the model fixes both batch sizes and they agree (the op needs a skip of the image's batch).
"""

from __future__ import annotations

from .. import DOMAIN
from .graph import FLOAT_TYPES, Graph, attrs, is_op, named_subgraphs

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


def _time_term(g, n, cuda: dict | None):
    """(the Add, its full input, its (N, C, 1, 1) input) when the GroupNormalization `n` reads an Add of a
    per-(image, channel) term that nothing else reads, and the library's SkipGroupNorm serves the type; else
    None."""
    add = g.producer.get(n.input[0])
    if not is_op(add, "Add") or len(add.input) != 2 or g.only_reader(add.output[0]) is not n:
        return None
    dims, elem = g.dims(n.input[0]), g.elem(n.input[0])
    if cuda is not None and FLOAT_TYPES.get(elem) not in cuda.get("SkipGroupNorm", ()):
        return None
    for full, term in (add.input, reversed(add.input)):
        fd, td = g.dims(full), g.dims(term)
        if (fd == dims and td is not None and len(td) == 4 and td[1:] == [dims[1], 1, 1]
                and isinstance(td[0], int) and td[0] == dims[0] and isinstance(dims[1], int)
                and g.elem(full) == g.elem(term) == elem):
            return add, full, term
    return None


def _nhwc(g, n, term=None) -> list:
    """`n` as Transpose -> tritonforge.GroupNorm -> Transpose, writing the values it wrote; with `term`
    (_time_term's), tritonforge.SkipGroupNorm of the Add's full input and the term as (N, C) instead."""
    from onnx import helper

    a = attrs(n)
    base = n.name or n.output[0]
    x = term[1] if term else n.input[0]
    x_nhwc, y_nhwc = g.unique(f"{x}_nhwc"), g.unique(f"{n.output[0]}_nhwc")
    kw = dict(name=n.name, domain=DOMAIN, groups=int(a["num_groups"]), epsilon=float(a.get("epsilon", 1e-5)),
              activation=int(a.get("activation", 0)))
    out = [helper.make_node("Transpose", [x], [x_nhwc], name=g.unique(f"{base}_to_nhwc"), perm=TO_NHWC)]
    if term:
        skip = g.unique(f"{term[2]}_nc")
        # Flatten from axis 1 of (N, C, 1, 1) is (N, C), a view; the sum output is named (see OrtGroupNorm)
        out += [helper.make_node("Flatten", [term[2]], [skip], name=g.unique(f"{base}_skip"), axis=1),
                helper.make_node("SkipGroupNorm", [x_nhwc, n.input[1], n.input[2], skip],
                                 [y_nhwc, g.unique(f"{n.output[0]}_tf_sum")], **kw)]
    else:
        out.append(helper.make_node("GroupNorm", [x_nhwc, n.input[1], n.input[2]], [y_nhwc], **kw))
    return out + [helper.make_node("Transpose", [y_nhwc], [n.output[0]], name=g.unique(f"{base}_to_nchw"),
                                   perm=TO_NCHW)]


def channels_last(g, cuda: dict | None) -> tuple[int, int, list[str]]:
    """Every 4-D tritonforge.GroupNormalization of the graph `g` (rewrite.graph.Graph) as tritonforge.GroupNorm
    between Transposes, in place. `cuda`: the library's CUDA dtypes per op (None: any). Returns (how many
    were written channels-last, how many of those took their time-embedding Add, why each other one was
    not)."""
    g.reindex()  # the rewrite's splices came after the index was made
    out, done, kept, folded, took = [], 0, [], set(), 0
    for n in g.scope.node:
        for attr, sub in named_subgraphs(n):  # If branches, Loop and Scan bodies: the same, each named where
            inner = Graph(g.model, g.base_dir, sub, g, f" in the {attr} of {n.op_type} node '{n.name}'{g.where}")
            d, f, k = channels_last(inner, cuda)
            done, kept, took = done + d, kept + k, took + f
        why = _stays_nchw(g, n, cuda) if n.domain == DOMAIN and n.op_type == "GroupNormalization" else ""
        if why is None:
            term = _time_term(g, n, cuda)
            out += _nhwc(g, n, term)
            folded |= {term[0].output[0]} if term else set()
            done, took = done + 1, took + bool(term)
            continue
        if why:
            kept.append(f"GroupNormalization node '{n.name or n.output[0]}'{g.where} stays NCHW: {why}")
        out.append(n)
    del g.scope.node[:]
    g.scope.node.extend(n for n in out if not (n.op_type == "Add" and n.output[0] in folded))
    return done, took, kept
