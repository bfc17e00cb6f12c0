"""The fp8 rewrite's quality check: each Linear about to go to fp8 is tried on the model's own activations first.

Before the Linears become Fp8Linear nodes (fp8.py), the model as rewritten so far runs once in onnxruntime on random
inputs (the CUDA EP where the installed onnxruntime has it, else the CPU EP), keeping every ROW_STEP-th token of
each candidate's input. Each candidate's product with those rows is then computed twice in float64: with the
operands as they are, and as the fp8 node rounds them (each token's row to e4m3 with its scale, the weight per output
channel; the same numbers as the GPU's). A Linear whose fp8 product falls below MIN_COSINE of the exact one stays in
its type, and the report names it with its cosine: an activation with an outlier channel, whose row scale rounds
every other channel to zero, is the usual cause.

The model's inputs must have fixed shapes (a dynamic-axes export has no rows to try until it runs): otherwise, or
without onnxruntime, the check is skipped and the report says why.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from ..fp8 import from_e4m3_bytes, quantize_rows

MIN_COSINE = 0.995  # a Linear's fp8 product against its exact one, on the model's own activations
ROW_STEP = 61  # every 61st token of an activation (a prime: no stride of the layout lines up with it)
_ONNX_FLOATS = {1: np.float32, 10: np.float16, 11: np.float64}


def activation_rows(model, base_dir, library, inputs: dict[str, int], scratch=None) -> dict[str, np.ndarray] | str:
    """{value: (rows, K) float64}: every ROW_STEP-th row of each value of `inputs` ({value: K}) when `model` runs
    once on random inputs; or why it could not run (a line for the report). `model` is left as it was. The session
    reads a copy of the model, weights and all, written in a folder made in `scratch` (default: the system's
    temporary folder, which may be a RAM disk far smaller than a diffusion transformer) and removed after."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed"
    from onnx import TensorProto, helper, numpy_helper

    from .files import write

    consts = {t.name for t in model.graph.initializer}
    feeds, rng = {}, np.random.default_rng(0)
    for i in model.graph.input:
        if i.name in consts:
            continue
        t = i.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
        if None in dims:
            open_dims = ", ".join(d.dim_param or "?" for d in t.shape.dim if not d.HasField("dim_value"))
            return f"input '{i.name}' has dims the model leaves open ({open_dims})"
        if t.elem_type == TensorProto.BFLOAT16:
            return f"input '{i.name}' is bfloat16, which numpy has no type to feed"
        if t.elem_type in _ONNX_FLOATS:
            feeds[i.name] = rng.standard_normal(dims).astype(_ONNX_FLOATS[t.elem_type])
        else:
            feeds[i.name] = np.zeros(dims, dtype=helper.tensor_dtype_to_np_dtype(t.elem_type))
    added_nodes, added_inits, added_outputs = [], [], []
    for n, (value, k) in enumerate(sorted(inputs.items())):
        shape, start, end, step = (f"fp8check.{n}.{s}" for s in ("shape", "start", "end", "step"))
        added_inits += [numpy_helper.from_array(np.array(v, np.int64), name) for v, name in
                        (([-1, k], shape), ([0], start), ([np.iinfo(np.int64).max], end), ([ROW_STEP], step))]
        out = f"fp8check.{n}.rows"
        added_nodes += [helper.make_node("Reshape", [value, shape], [out + ".2d"]),
                        helper.make_node("Slice", [out + ".2d", start, end, start, step], [out + ".h"]),
                        helper.make_node("Cast", [out + ".h"], [out], to=TensorProto.FLOAT)]
        added_outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, None))
    g = model.graph
    g.node.extend(added_nodes)
    g.initializer.extend(added_inits)
    g.output.extend(added_outputs)
    try:
        with tempfile.TemporaryDirectory(prefix=".tritonforge-fp8-check-", dir=scratch) as tmp:
            path = Path(tmp) / "check.onnx"
            # a copy: write points the tensors it writes at its own data file, which goes with `tmp`
            write(model.__deepcopy__(), path, base_dir, check=False)
            so = ort.SessionOptions()
            so.log_severity_level = 3
            if library:
                so.register_custom_ops_library(str(library))
            providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider")
                         if p in ort.get_available_providers()]
            try:
                sess = ort.InferenceSession(str(path), so, providers=providers)
                got = sess.run([o.name for o in added_outputs], feeds)
            except Exception as exc:  # onnxruntime's own classes share no public base
                return f"onnxruntime could not run the model ({str(exc).splitlines()[0][:200]})"
    finally:
        del g.node[len(g.node) - len(added_nodes):]
        del g.initializer[len(g.initializer) - len(added_inits):]
        del g.output[len(g.output) - len(added_outputs):]
    return {value: np.asarray(rows, np.float64) for value, rows in zip(sorted(inputs), got)}


def fp8_cosine(rows: np.ndarray, weight: np.ndarray, w_q: np.ndarray, w_scale: np.ndarray) -> float:
    """The cosine between rows @ weight (K, N) and the same product as Fp8Linear computes it: the rows quantized per
    token, the weight as (w_q (N, K) e4m3 bytes, w_scale (N)). 1.0 where both are zero."""
    x_q, x_scale = quantize_rows(rows)
    exact = rows @ weight
    approx = (from_e4m3_bytes(x_q) * x_scale[:, None]) @ (from_e4m3_bytes(w_q) * w_scale[:, None].astype(np.float64)).T
    a, b = exact.ravel(), approx.ravel()
    norms = np.linalg.norm(a) * np.linalg.norm(b)
    if norms == 0:
        return 1.0 if not a.any() and not b.any() else 0.0
    return float(a @ b / norms)
