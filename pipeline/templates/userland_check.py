"""Run inside an older Linux by pipeline/package/userland.py, with the tritonforge_ort wheel and onnxruntime
(CPU) pip-installed into a fresh venv of that system's own Python: import the package, load the library
in onnxruntime, rewrite a model (the one given, or GroupNorm + SiLU and a softmax written as torch.onnx
writes them) with `tritonforge-rewrite`, and run the rewrite on the CPU EP with the library's ops against
onnxruntime's own run of the original. Prints one JSON line; exits non-zero on any failure, when the rewrite put
no node on the library's ops, or when their numbers are not onnxruntime's own within the dtype's tolerance."""

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import tritonforge_ort
from onnx import TensorProto, helper, numpy_helper


def builtin(path):
    """x (2, 32, 8, 8) -> Reshape [0, 8, -1] -> InstanceNormalization -> Reshape(Shape(x)) -> Mul -> Add ->
    x * Sigmoid(x) -> Softmax over a last axis of 64 (fp32 rows the library takes only when told to) ->
    LayerNormalization with a constant affine (the library's AdaLayerNorm, whose optional inputs and output the
    node leaves out: what onnxruntime before 1.21 is touchy about)."""
    rng = np.random.default_rng(0)
    c, g = 32, 8
    inits = [numpy_helper.from_array(np.array([0, g, -1], np.int64), "regroup"),
             numpy_helper.from_array(np.ones(g, np.float32), "ones"),
             numpy_helper.from_array(np.zeros(g, np.float32), "zeros"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, (c, 1, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.uniform(-1, 1, (c, 1, 1)).astype(np.float32), "b"),
             numpy_helper.from_array(np.array([2, c, 64], np.int64), "rows"),
             numpy_helper.from_array(rng.uniform(0.5, 1.5, 64).astype(np.float32), "ln_w"),
             numpy_helper.from_array(rng.uniform(-1, 1, 64).astype(np.float32), "ln_b")]
    nodes = [helper.make_node("Reshape", ["x", "regroup"], ["grouped"]),
             helper.make_node("InstanceNormalization", ["grouped", "ones", "zeros"], ["normed"], epsilon=1e-5,
                              name="norm/InstanceNormalization"),
             helper.make_node("Shape", ["x"], ["xs"]), helper.make_node("Reshape", ["normed", "xs"], ["back"]),
             helper.make_node("Mul", ["back", "w"], ["scaled"]), helper.make_node("Add", ["scaled", "b"], ["gn"]),
             helper.make_node("Sigmoid", ["gn"], ["sig"]), helper.make_node("Mul", ["gn", "sig"], ["act"]),
             helper.make_node("Reshape", ["act", "rows"], ["r"]),
             helper.make_node("Softmax", ["r"], ["p"], axis=-1, name="attn"),
             helper.make_node("LayerNormalization", ["p", "ln_w", "ln_b"], ["y"], axis=-1, epsilon=1e-5, name="ln")]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c, 64])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # what torch.onnx writes at opset 17, and what every onnxruntime since 1.14 reads
    onnx.save(model, path)


def feeds(sess):
    rng = np.random.default_rng(1)
    out = {}
    for i in sess.get_inputs():
        dt = {"tensor(float16)": np.float16, "tensor(float)": np.float32, "tensor(int64)": np.int64}[i.type]
        shape = [d if isinstance(d, int) else 2 for d in i.shape]
        out[i.name] = (rng.integers(0, 1000, shape) if dt is np.int64 else rng.standard_normal(shape)).astype(dt)
    return out


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else "/tmp/block.onnx"
    if len(sys.argv) == 1:
        builtin(model)
    info = tritonforge_ort.info()  # the library loads (ctypes) and says what it holds
    out = model[: -len(".onnx")] + ".tf.onnx"
    said = subprocess.run([os.path.join(os.path.dirname(sys.executable), "tritonforge-rewrite"), model, "-o", out,
                           "--any-dtype", "--all-softmax", "--attention", "tritonforge"],  # every op on the library
                          capture_output=True, text=True)
    if said.returncode:
        sys.exit(f"tritonforge-rewrite failed: {said.stderr.strip()}")
    so = ort.SessionOptions()
    tritonforge_ort.register(so)
    ours = ort.InferenceSession(out, so, providers=["CPUExecutionProvider"])
    theirs = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = feeds(theirs)
    a, b = (s.run(None, x)[0].astype(np.float64) for s in (ours, theirs))
    rewritten = sum(n.domain == "tritonforge" for n in onnx.load(out, load_external_data=False).graph.node)
    diff = float(np.abs(a - b).max() / np.abs(b).max())
    print(json.dumps({"glibc": os.confstr("CS_GNU_LIBC_VERSION"), "python": sys.version.split()[0],
                      "onnxruntime": ort.__version__, "kernels": info["kernels"], "rewritten": rewritten,
                      "said": said.stdout.strip().splitlines(), "max_rel_diff": diff}))
    if not rewritten:
        sys.exit(f"{model}: the rewrite put no node on the library's ops")
    tol = 2e-2 if any(i.type == "tensor(float16)" for i in theirs.get_inputs()) else 1e-3
    if not diff <= tol:  # NaN fails too
        sys.exit(f"{model}: the library's ops give {diff:.3g} (max |a - b| / max |b|) against onnxruntime's own; "
                 f"tolerance {tol}")


if __name__ == "__main__":
    main()
