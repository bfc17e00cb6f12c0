"""Put a model's GroupNorm and softmax nodes into the custom-op library's domain, leaving the rest.

    from tritonforge.runtime.ortlib.rewrite import rewrite_file
    report = rewrite_file("unet.onnx", "unet.tf.onnx")

Rewritten, when dtype (fp16, fp32, bf16) and shape qualify:
- ONNX `GroupNormalization` (opset 18-20: scale and bias per group; 21+: per channel; NCHW) ->
  `tritonforge.GroupNormalization`, scale and bias as fp32 per-channel initializers; a following SiLU
  (`Sigmoid` and `Mul` of the same value, nothing else reading it) is fused in (`activation=1`);
- `com.microsoft.GroupNorm` / `SkipGroupNorm` (NHWC) -> `tritonforge.GroupNorm` / `SkipGroupNorm`, float16
  gamma and beta initializers made fp32;
- `Softmax` / `LogSoftmax` over the last axis -> `tritonforge.Softmax` / `LogSoftmax`, when that axis is
  at least SOFTMAX_MIN_COLS long: on shorter rows (attention over 77 text tokens, ViT's 197) ORT's own
  kernel measured faster than the library's (benchmarks/results/ortlib_softmax_h200.log), so those
  nodes stay ORT's unless `softmax_min_cols=0`.
A node is left as it is (the report says why) when its parameters are not initializers where the op
needs them, its rank or axis are not known, or the library (`library=`) has no CUDA kernel for its dtype.
A model that passes `onnx.checker` still does after, node names and outputs are kept; the domain is added to the
model's opsets.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tritonforge.errors import TritonforgeError

from . import DOMAIN, info

FLOAT_TYPES = {1: "fp32", 10: "fp16", 16: "bf16"}  # onnx.TensorProto FLOAT, FLOAT16, BFLOAT16
# The shortest last axis from which the library's softmax measured at least as fast as ORT's own on the
# zoo's rows (H200, onnxruntime-gpu 1.31.1): fp16 wins from 256 columns, fp32 from 1024; bf16 (no ORT
# rival measured) follows fp16.
SOFTMAX_MIN_COLS = {"fp16": 256, "bf16": 256, "fp32": 1024}


class RewriteError(TritonforgeError, ValueError):
    pass


@dataclass
class Report:
    rewritten: Counter = field(default_factory=Counter)  # op -> nodes rewritten
    fused_silu: int = 0
    left: list[str] = field(default_factory=list)  # "<op> node '<name>': why"

    def lines(self) -> list[str]:
        out = [f"{op}: {n} node(s) -> {DOMAIN}.{op}" for op, n in sorted(self.rewritten.items())]
        if self.fused_silu:
            out.append(f"SiLU fused into {self.fused_silu} GroupNormalization node(s)")
        out += [f"left as is: {why}" for why in self.left]
        return out or ["nothing to rewrite"]


def _opset(model, domain: str = "") -> int:
    return next((o.version for o in model.opset_import if o.domain in ((domain,) if domain else ("", "ai.onnx"))), 0)


# Ops ONNX's shape inference says nothing about (GroupNormalization-18/21 in onnx 1.23, contrib and custom
# ops), whose first output has the type and shape of their first input: inference runs on a copy where
# they are Identity, so that everything after them gets types too.
_SAME_AS_X = {("", "GroupNormalization"), ("ai.onnx", "GroupNormalization"), ("com.microsoft", "GroupNorm"),
              ("com.microsoft", "SkipGroupNorm"), (DOMAIN, "GroupNorm"), (DOMAIN, "SkipGroupNorm"),
              (DOMAIN, "GroupNormalization"), (DOMAIN, "Softmax"), (DOMAIN, "LogSoftmax")}


class _Graph:
    """The names of a graph: initializers, value types and ranks (after ONNX shape inference), outputs."""

    def __init__(self, model):
        import onnx
        from onnx import helper

        probe = onnx.ModelProto()
        probe.CopyFrom(model)
        for n in probe.graph.node:
            if (n.domain, n.op_type) in _SAME_AS_X and n.input:
                n.CopyFrom(helper.make_node("Identity", [n.input[0]], [n.output[0]], name=n.name))
        try:
            inferred = onnx.shape_inference.infer_shapes(probe)
        except Exception:  # a model shape inference cannot read still rewrites where types are declared
            inferred = probe
        g = model.graph
        self.inits = {t.name: t for t in g.initializer}
        self.types: dict[str, tuple[int, list | None]] = {}
        for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
            t = vi.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim] if t.HasField("shape") \
                else None
            self.types[vi.name] = (t.elem_type, dims)
        for t in g.initializer:
            self.types[t.name] = (t.data_type, list(t.dims))
        self.outputs = {o.name for o in g.output}

    def elem(self, name: str) -> int:
        return self.types.get(name, (0, None))[0]

    def dims(self, name: str) -> list | None:
        return self.types.get(name, (0, None))[1]


def _attrs(node) -> dict:
    import onnx

    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _fp32_initializer(model, graph: _Graph, name: str, new_name: str, repeat: int = 1):
    """An fp32 copy of initializer `name` (each value repeated `repeat` times), added to the model."""
    import numpy as np
    from onnx import numpy_helper

    values = numpy_helper.to_array(graph.inits[name]).astype(np.float32).reshape(-1)
    if repeat > 1:
        values = np.repeat(values, repeat)
    model.graph.initializer.append(numpy_helper.from_array(values, new_name))
    return new_name


def rewrite(model, library: str | os.PathLike | None = None, use_library: bool = True,
            softmax_min_cols: dict | int | None = None):
    """Rewrite an onnx.ModelProto in place; returns a Report. With `use_library`, only ops whose dtype
    the library's CUDA kernels serve are rewritten (`library`: its path; default: ortlib.library_path).
    `softmax_min_cols`: the shortest last axis a softmax is rewritten at, per dtype or one for all
    (default SOFTMAX_MIN_COLS; 0 rewrites every one)."""
    import onnx
    from onnx import helper

    cuda = info(library)["cuda"] if use_library else None
    if softmax_min_cols is None:
        softmax_min_cols = SOFTMAX_MIN_COLS
    min_cols = softmax_min_cols if isinstance(softmax_min_cols, dict) else dict.fromkeys(FLOAT_TYPES.values(),
                                                                                         softmax_min_cols)
    try:
        onnx.checker.check_model(model)
        valid = True
    except onnx.checker.ValidationError:
        valid = False  # a model the checker refuses already (ORT may still run it): nothing to keep valid
    graph = _Graph(model)
    report = Report()
    opset = _opset(model)
    nodes = list(model.graph.node)
    consumers = {}
    for n in nodes:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    drop: set[int] = set()
    new_nodes: dict[int, object] = {}

    def left(node, why):
        report.left.append(f"{node.op_type} node '{node.name}': {why}")

    def serves(op, dtype):
        return cuda is None or dtype in cuda.get(op, [])

    def unique(base: str) -> str:
        name, k = base, 1
        while name in graph.types or name in graph.inits:
            name, k = f"{base}_{k}", k + 1
        graph.types[name] = (1, None)
        return name

    for idx, node in enumerate(nodes):
        a = _attrs(node)
        x = node.input[0] if node.input else ""
        dtype = FLOAT_TYPES.get(graph.elem(x))
        dims = graph.dims(x)
        if node.domain in ("", "ai.onnx") and node.op_type == "GroupNormalization":
            if opset < 18:
                continue
            if dtype is None or dims is None or len(dims) < 3:
                left(node, "X's dtype or rank is unknown, or not float16/float/bfloat16 of rank 3 or more")
                continue
            if not serves("GroupNormalization", dtype):
                left(node, f"the library has no CUDA GroupNormalization kernel for {dtype}")
                continue
            scale, bias = node.input[1], node.input[2]
            if scale not in graph.inits or bias not in graph.inits:
                left(node, "scale and bias are not initializers")
                continue
            if a.get("stash_type", 1) != 1:
                left(node, "stash_type is not float32")
                continue
            groups = int(a["num_groups"])
            per_group = opset < 21
            c = dims[1]
            if per_group and not c:
                left(node, "opset-18 scale per group needs the channel count, which the model does not state")
                continue
            repeat = c // groups if per_group else 1
            want = groups if per_group else c
            if want and math.prod(graph.inits[scale].dims) != want:
                left(node, f"scale has {list(graph.inits[scale].dims)} values, expected {want}")
                continue
            out = node.output[0]
            silu = None
            users = consumers.get(out, [])
            if out not in graph.outputs and len(users) == 2:
                sig = next((u for u in users if u.op_type == "Sigmoid" and u.domain in ("", "ai.onnx")), None)
                mul = next((u for u in users if u.op_type == "Mul" and u.domain in ("", "ai.onnx")), None)
                if (sig and mul and set(mul.input) == {out, sig.output[0]} and sig.output[0] not in graph.outputs
                        and len(consumers.get(sig.output[0], [])) == 1):
                    silu = (sig, mul)
            base = node.name or out
            s32 = _fp32_initializer(model, graph, scale, unique(f"{base}_tf_scale"), repeat)
            b32 = _fp32_initializer(model, graph, bias, unique(f"{base}_tf_bias"), repeat)
            result = silu[1].output[0] if silu else out
            new_nodes[idx] = helper.make_node("GroupNormalization", [x, s32, b32], [result], name=node.name,
                                              domain=DOMAIN, num_groups=groups, epsilon=float(a.get("epsilon", 1e-5)),
                                              activation=1 if silu else 0)
            if silu:
                drop.update(nodes.index(n) for n in silu)
                report.fused_silu += 1
            report.rewritten["GroupNormalization"] += 1
        elif node.domain == "com.microsoft" and node.op_type in ("GroupNorm", "SkipGroupNorm"):
            if dtype is None:
                left(node, "X's dtype is unknown or not float16/float/bfloat16")
                continue
            if not serves(node.op_type, dtype):
                left(node, f"the library has no CUDA {node.op_type} kernel for {dtype}")
                continue
            if a.get("channels_last", 1) != 1:
                left(node, "channels_last=0 (NCHW) is not the NHWC op")
                continue
            inputs = list(node.input)
            ok = True
            for k in (1, 2):
                t = graph.elem(inputs[k])
                if t == 1:
                    continue
                role = "gamma" if k == 1 else "beta"
                if inputs[k] in graph.inits:
                    new = unique(f"{node.name or node.output[0]}_tf_{role}")
                    inputs[k] = _fp32_initializer(model, graph, inputs[k], new)
                else:
                    left(node, f"{role} is not float and not an initializer")
                    ok = False
                    break
            if not ok:
                continue
            kept = {k: v for k, v in a.items() if k in ("activation", "epsilon", "groups", "channels_last")}
            new_nodes[idx] = helper.make_node(node.op_type, inputs, list(node.output), name=node.name, domain=DOMAIN,
                                              **kept)
            report.rewritten[node.op_type] += 1
        elif node.domain in ("", "ai.onnx") and node.op_type in ("Softmax", "LogSoftmax"):
            if dtype is None or dims is None or not dims:
                left(node, "X's dtype or rank is unknown, or not float16/float/bfloat16")
                continue
            rank = len(dims)
            axis = a.get("axis", -1 if opset >= 13 else 1)
            if axis < 0:
                axis += rank
            if axis != rank - 1:
                left(node, f"axis {a.get('axis')} is not the last of rank {rank}")
                continue
            if not serves(node.op_type, dtype):
                left(node, f"the library has no CUDA {node.op_type} kernel for {dtype}")
                continue
            shortest = min_cols.get(dtype, 0)
            cols = dims[-1]
            if shortest and not isinstance(cols, int):
                left(node, f"the last axis' length is not known; ORT's own kernel is faster on rows under "
                           f"{shortest} ({dtype})")
                continue
            if shortest and cols < shortest:
                left(node, f"rows of {cols}: ORT's own kernel measured faster under {shortest} columns ({dtype}); "
                           "softmax_min_cols=0 (invoke rewrite --all-softmax) rewrites it anyway")
                continue
            new_nodes[idx] = helper.make_node(node.op_type, [x], list(node.output), name=node.name, domain=DOMAIN)
            report.rewritten[node.op_type] += 1
    if new_nodes:
        kept = [new_nodes.get(i, n) for i, n in enumerate(nodes) if i not in drop]
        del model.graph.node[:]
        model.graph.node.extend(kept)
        if not any(o.domain == DOMAIN for o in model.opset_import):
            model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    if valid:
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as exc:
            raise RewriteError(f"the rewritten model does not pass onnx.checker: {exc}") from None
    return report


def rewrite_file(src: str | os.PathLike, dst: str | os.PathLike, library: str | os.PathLike | None = None,
                 use_library: bool = True, softmax_min_cols: dict | int | None = None) -> Report:
    """Read `src`, rewrite, write `dst` atomically (external data is not supported: models under 2 GB)."""
    import onnx

    from tritonforge.atomic import write_bytes

    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise RewriteError(f"{dst}: would overwrite the model being read; write the rewrite elsewhere")
    try:
        model = onnx.load(str(src))
    except Exception as exc:
        raise RewriteError(f"{src}: cannot read an ONNX model: {exc}") from None
    report = rewrite(model, library, use_library, softmax_min_cols)
    write_bytes(dst, model.SerializeToString())
    return report
