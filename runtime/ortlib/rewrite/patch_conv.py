"""A patch embedding's Conv in bfloat16 as the Linear it is.

The diffusion transformers cut their latent into p x p patches and project each (SD3's, SD3.5's and PixArt's
`PatchEmbed`: a Conv whose kernel is its stride, no padding). onnxruntime's CUDA EP has no bfloat16 Conv, so a
bfloat16 export with that node does not run there at all. A Conv whose kernel is its stride reads each input
pixel once: it is the patches laid out as rows, (N, h, w, C * kh * kw), times the weight as a matrix, plus the
bias. Written with Reshapes and Transposes (any element type) and the library's Linear (one cuBLASLt call with the
bias in its epilogue, bfloat16 included; plain C++ on the CPU EP):

    x (N, C, H, W) -> (N, C, H, w, kw) -> (N, C, w, kw, H) -> (N, C, w, kw, h, kh) -> (N, h, w, C, kh, kw)
      -> Linear((N, h, w, C * kh * kw), W', b) -> (N, O, h, w)

The Reshapes take their sizes from x (0 copies a dim, -1 infers one), so dynamic heights and widths are served;
a height or width that is not a multiple of the patch, which the Conv would crop, is refused by the Reshape at
run time where it is not known here. Written for bfloat16 only, where the export's node cannot run at all (so no
measured choice: it is the only way the model runs); in other types the Conv stays as exported (cuDNN's, not
measured against this).
"""

from __future__ import annotations

import numpy as np

from .. import DOMAIN
from .graph import attrs, is_op
from .patterns import Left, Match, Rewriter

TYPES = ("bf16",)  # where ORT's CUDA EP has no Conv


class PatchConv:
    """Conv(x, W, b) with kernel_shape == strides (a patch, not 1x1), no padding, dilation 1, one group (see the
    module's text)."""

    anchors = {("", "Conv")}
    source = "Conv whose kernel is its stride (a patch embedding; bfloat16, which ORT's CUDA Conv does not take)"

    def match(self, r: Rewriter, conv):
        from onnx import helper

        g = r.graph
        x = conv.input[0]
        if not is_op(conv, "Conv") or r.dtype(x) not in TYPES:
            return None
        r.check_served("Linear", r.dtype(x), TYPES)
        w = g.weight(conv.input[1])
        if w is None:
            raise Left("the weight is not a constant")
        if w.ndim != 4:
            return None
        a = attrs(conv)
        kernel = [int(k) for k in a.get("kernel_shape", w.shape[2:])]
        if kernel != list(w.shape[2:]) or [int(s) for s in a.get("strides", [1, 1])] != kernel or kernel == [1, 1]:
            return None  # a convolution that overlaps or skips pixels, or a pointwise one: not a patch embedding
        if any(a.get("pads", [0] * 4)) or any(d != 1 for d in a.get("dilations", [1, 1])) or \
                a.get("group", 1) != 1 or a.get("auto_pad", b"NOTSET") not in (b"NOTSET", b"VALID", "NOTSET", "VALID"):
            raise Left("the patch Conv pads, dilates or groups: not a patch embedding")
        dims = g.dims(x)
        if dims is None or len(dims) != 4:
            raise Left("X is not (N, C, H, W)")
        for size, k, what in zip(dims[2:], kernel, ("height", "width")):
            if isinstance(size, int) and size % k:
                raise Left(f"X's {what} {size} is not a multiple of the patch's {k}")
        bias = g.const(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
        if len(conv.input) > 2 and conv.input[2] and bias is None:
            raise Left("the bias is not a constant")
        (kh, kw), out, name = kernel, conv.output[0], conv.name or r.node_name(conv.output[0])
        wide, by_width, cut, patches, rows, proj = (g.unique(f"{out}_patch_{what}") for what in (
            "w", "by_width", "cut", "patches", "rows", "proj"))
        before = [
            helper.make_node("Reshape", [x, r.int64([0, 0, 0, -1, kw], "patch_shape")], [wide],
                             name=f"{name}/Reshape_w"),
            helper.make_node("Transpose", [wide], [by_width], perm=[0, 1, 3, 4, 2], name=f"{name}/Transpose_w"),
            helper.make_node("Reshape", [by_width, r.int64([0, 0, 0, 0, -1, kh], "patch_shape")], [cut],
                             name=f"{name}/Reshape_h"),
            helper.make_node("Transpose", [cut], [patches], perm=[0, 4, 2, 1, 5, 3], name=f"{name}/Transpose_h"),
            helper.make_node("Reshape", [patches, r.int64([0, 0, 0, -1], "patch_shape")], [rows],
                             name=f"{name}/Reshape_rows")]
        matrix = r.typed(np.ascontiguousarray(w.reshape(w.shape[0], -1).T), f"{conv.input[1]}_matrix")
        bias = bias.reshape(-1) if bias is not None else np.zeros(w.shape[0], w.dtype)
        node = helper.make_node("Linear", [rows, matrix, r.typed(bias, f"{conv.input[1]}_bias")], [proj],
                                name=f"{name}/Linear", domain=DOMAIN, activation="none")
        after = [helper.make_node("Transpose", [proj], [out], perm=[0, 3, 1, 2], name=f"{name}/Transpose_out")]
        return Match([conv], node, self.source, before=before, after=after, dtype=r.dtype(x))


PATCH_CONV = (PatchConv(),)
