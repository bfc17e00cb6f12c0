"""ORT's own kernels, timed in ORT's own process: the rival TunableOp measures a Triton candidate against.

A graph of K identical nodes of one op, each on an input of its own (so every node reads its input
from DRAM, not from what the previous node left in L2, as our kernels are timed over rotating
buffers), runs in onnxruntime's CUDA execution provider with IOBinding on device tensors, with ORT's
CUDA graph capture where the op allows it (no host launch gaps, as our graph-replay timing), else
plain runs. Per node: the median wall time of many runs over K. Ops:

- `com.microsoft.GroupNorm` (NHWC, `activation` 1 = SiLU, fp16 / fp32 x, fp32 gamma and beta), what
  ORT's Stable Diffusion optimizer writes;
- `Softmax` (opset 13, last axis).

Needs `onnx` (building the graphs) and `onnxruntime-gpu` (the CUDA EP; `onnxruntime` serves the CPU EP,
which the CPU tests use). Where either is missing, `unavailable()` says so in one line and the
benchmarks leave this rival out.
"""

from __future__ import annotations

import math
import re
import statistics
import time

import numpy as np

CUDA_EP = "CUDAExecutionProvider"
NP_TYPES = {"fp32": np.float32, "fp16": np.float16}


def unavailable(provider: str = CUDA_EP) -> str | None:
    """None when ORT's `provider` can run here; otherwise why not, in one line."""
    try:
        import onnx  # noqa: F401
    except ImportError:
        return "onnx is not installed (it builds the graphs)"
    try:
        import onnxruntime
    except ImportError:
        return "onnxruntime is not installed (onnxruntime-gpu for the CUDA EP)"
    if provider not in onnxruntime.get_available_providers():
        return f"onnxruntime {onnxruntime.__version__} has no {provider} (install onnxruntime-gpu)"
    return None


def _tensor_type(dtype: str):
    from onnx import TensorProto

    try:
        return {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}[dtype]
    except KeyError:
        raise ValueError(f"ORT's own kernels are timed for fp16, bf16 and fp32, not {dtype!r}") from None


def _is_torch(value) -> bool:
    return type(value).__module__.startswith("torch")


def _torch_elem(t) -> int:
    import torch
    from onnx import TensorProto

    return {torch.float16: TensorProto.FLOAT16, torch.float32: TensorProto.FLOAT,
            torch.bfloat16: TensorProto.BFLOAT16}[t.dtype]


def _model(nodes: list, inputs: list, outputs: list, initializers: list, domains: dict):
    from onnx import helper

    graph = helper.make_graph(nodes, "rival", inputs, outputs, initializer=initializers)
    opsets = [helper.make_opsetid(domain, version) for domain, version in domains.items()]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="tritonforge")
    model.ir_version = 8  # every onnxruntime since 1.10 reads it
    return model


def group_norm_model(n: int, h: int, w: int, c: int, groups: int, dtype: str, silu: bool, eps: float = 1e-5,
                     nodes: int = 1):
    """`nodes` independent com.microsoft.GroupNorm nodes on NHWC inputs x<i> -> y<i>, shared gamma/beta."""
    from onnx import helper, numpy_helper

    t = _tensor_type(dtype)
    rng = np.random.default_rng(0)
    gamma = numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), "gamma")
    beta = numpy_helper.from_array(rng.uniform(-0.5, 0.5, c).astype(np.float32), "beta")
    shape = [n, h, w, c]
    graph_nodes = [helper.make_node("GroupNorm", [f"x{i}", "gamma", "beta"], [f"y{i}"], domain="com.microsoft",
                                    activation=int(silu), channels_last=1, epsilon=float(eps), groups=groups)
                   for i in range(nodes)]
    return _model(graph_nodes, [helper.make_tensor_value_info(f"x{i}", t, shape) for i in range(nodes)],
                  [helper.make_tensor_value_info(f"y{i}", t, shape) for i in range(nodes)], [gamma, beta],
                  {"": 17, "com.microsoft": 1})


def group_normalization_model(n: int, c: int, h: int, w: int, groups: int, dtype: str, silu: bool,
                              eps: float = 1e-5, nodes: int = 1):
    """`nodes` independent ONNX GroupNormalization nodes (opset 21, NCHW, scale and bias per channel, what
    PyTorch's exporter writes), each followed by SiLU as Sigmoid and Mul when `silu`."""
    from onnx import helper, numpy_helper

    t = _tensor_type(dtype)
    rng = np.random.default_rng(0)
    np_type = NP_TYPES[dtype]
    scale = numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np_type), "scale")
    bias = numpy_helper.from_array(rng.uniform(-0.5, 0.5, c).astype(np_type), "bias")
    shape = [n, c, h, w]
    graph_nodes = []
    for i in range(nodes):
        out = f"g{i}" if silu else f"y{i}"
        graph_nodes.append(helper.make_node("GroupNormalization", [f"x{i}", "scale", "bias"], [out], num_groups=groups,
                                            epsilon=float(eps), name=f"gn{i}"))
        if silu:
            graph_nodes += [helper.make_node("Sigmoid", [out], [f"s{i}"]), helper.make_node("Mul", [out, f"s{i}"],
                                                                                            [f"y{i}"])]
    return _model(graph_nodes, [helper.make_tensor_value_info(f"x{i}", t, shape) for i in range(nodes)],
                  [helper.make_tensor_value_info(f"y{i}", t, shape) for i in range(nodes)], [scale, bias], {"": 21})


def softmax_model(rows: int, cols: int, dtype: str, nodes: int = 1):
    """`nodes` independent last-axis Softmax nodes (opset 13) on [rows, cols] inputs x<i> -> y<i>."""
    from onnx import helper

    t = _tensor_type(dtype)
    graph_nodes = [helper.make_node("Softmax", [f"x{i}"], [f"y{i}"], axis=-1) for i in range(nodes)]
    return _model(graph_nodes, [helper.make_tensor_value_info(f"x{i}", t, [rows, cols]) for i in range(nodes)],
                  [helper.make_tensor_value_info(f"y{i}", t, [rows, cols]) for i in range(nodes)], [], {"": 13})


def node_count(tensor_bytes: int, l2_bytes: int, most_bytes: int = 16 << 30) -> int:
    """Nodes whose inputs and outputs together span 3x the L2 (2 to 200), at least 20 where 20 pairs of
    buffers fit in `most_bytes`."""
    pair = max(2 * tensor_bytes, 1)
    k = max(2, min(200, math.ceil(3 * l2_bytes / pair)))
    return max(k, 20) if 20 * pair <= most_bytes else k


def median_run_s(session, binding, runs: int, warmup: int) -> float:
    """Median wall seconds of `runs` run_with_iobinding calls after `warmup` untimed ones."""
    for _ in range(warmup):
        session.run_with_iobinding(binding)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run_with_iobinding(binding)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class OrtRival:
    """Sessions of one execution provider timing graphs of K identical nodes (see the module's text)."""

    def __init__(self, provider: str = CUDA_EP, device_id: int = 0, custom_ops: str | None = None,
                 optimize: bool = False, tf32: bool = True):
        """custom_ops: a custom-op library every session registers (runtime/ortlib); optimize: ORT's graph
        optimizations on, as a user's session has them (for graphs whose nodes ORT itself fuses: a MatMul and
        its bias Add into a Gemm); tf32: the CUDA EP's default, float MatMuls on TF32 (off where a check against
        float64 reads a float MatMul's output)."""
        import onnxruntime as ort

        why = unavailable(provider)
        if why:
            raise RuntimeError(why)
        self.ort, self.provider, self.device_id, self.custom_ops = ort, provider, device_id, custom_ops
        self.optimize, self.tf32 = optimize, tf32
        self.device = "cuda" if provider == CUDA_EP else "cpu"
        self.version = ort.__version__

    def _session(self, model, graph: bool):
        so = self.ort.SessionOptions()
        so.log_severity_level = 3
        # The graph as built unless asked: no fusion or layout change may replace ORT's kernel under test.
        level = self.ort.GraphOptimizationLevel
        so.graph_optimization_level = level.ORT_ENABLE_ALL if self.optimize else level.ORT_DISABLE_ALL
        if self.custom_ops:
            so.register_custom_ops_library(str(self.custom_ops))
        options = {"device_id": str(self.device_id), **({} if self.tf32 else {"use_tf32": "0"})}
        if graph:
            options["enable_cuda_graph"] = "1"
        providers = [(self.provider, options)] if self.provider == CUDA_EP else [self.provider]
        return self.ort.InferenceSession(model.SerializeToString(), so, providers=providers)

    def run(self, model, inputs: dict[str, np.ndarray], runs: int = 20, graph: bool = True, fetch: bool = True):
        """(median ms per run, outputs as host arrays (None unless fetch), "cuda graph" or "plain"): inputs
        bound on the device once, outputs preallocated there."""
        modes = [True, False] if graph and self.provider == CUDA_EP else [False]
        last = None
        for use_graph in modes:
            try:
                return self._run(model, inputs, runs, use_graph, fetch)
            except Exception as exc:  # ORT raises its own Fail / InvalidArgument types
                last = exc
        raise RuntimeError(f"ORT {self.version} {self.provider}: {str(last).splitlines()[0][:300]}") from last

    def _run(self, model, inputs, runs, use_graph, fetch):
        session = self._session(model, use_graph)
        binding = session.io_binding()
        values = []
        for name, array in inputs.items():
            values.append(self._device_value(array))
            self._bind(binding.bind_input, binding.bind_ortvalue_input, name, values[-1])
        for out in session.get_outputs():
            # y<i> (and y<i><suffix>, a node's second output) has x<i>'s type, and its shape where the model
            # leaves it open
            twin = re.sub(r"^y(\d+).*", r"x\1", out.name)
            if twin not in inputs:
                raise ValueError(f"output {out.name} has no input {twin} to take its type from: name the graph's "
                                 "inputs x<i> and outputs y<i>")
            src = inputs[twin]
            shape = out.shape if all(isinstance(d, int) for d in out.shape) else None
            values.append(self._empty_like(src, shape))
            self._bind(binding.bind_output, binding.bind_ortvalue_output, out.name, values[-1])
        # the first runs capture the graph (or warm the arena and kernels)
        seconds = median_run_s(session, binding, runs, warmup=3)
        outputs = ({o.name: self._host(v) for o, v in zip(session.get_outputs(), values[len(inputs):])} if fetch
                   else None)
        return seconds * 1e3, outputs, "cuda graph" if use_graph else "plain"

    # A value is an onnxruntime OrtValue, or (bfloat16, which numpy has no type for) a torch tensor on the device,
    # bound by its address.
    def _device_value(self, array):
        if _is_torch(array):
            return array.contiguous()
        return self.ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self.device, self.device_id)

    def _empty_like(self, src, shape=None):
        shape = list(src.shape if shape is None else shape)
        if _is_torch(src):
            import torch

            return torch.empty(shape, dtype=src.dtype, device=src.device)
        return self.ort.OrtValue.ortvalue_from_shape_and_type(shape, src.dtype, self.device, self.device_id)

    def _bind(self, by_address, by_value, name, value):
        if _is_torch(value):
            by_address(name, self.device, self.device_id, _torch_elem(value), list(value.shape), value.data_ptr())
        else:
            by_value(name, value)

    @staticmethod
    def _host(value) -> np.ndarray:
        return value.float().cpu().numpy() if _is_torch(value) else value.numpy()

    def group_norm_us(self, n, h, w, c, groups, dtype, silu, eps=1e-5, l2_bytes=50 << 20, rng=None):
        """(us per node, mode, nodes): ORT's com.microsoft.GroupNorm on random NHWC inputs."""
        rng = rng or np.random.default_rng()
        nodes = node_count(n * h * w * c * np.dtype(NP_TYPES[dtype]).itemsize, l2_bytes)
        x = (rng.standard_normal((n, h, w, c), dtype=np.float32) * 2 + 0.5).astype(NP_TYPES[dtype])
        ms, _, mode = self.run(group_norm_model(n, h, w, c, groups, dtype, silu, eps, nodes),
                               {f"x{i}": x for i in range(nodes)}, fetch=False)
        return ms * 1e3 / nodes, mode, nodes

    def softmax_us(self, rows, cols, dtype, l2_bytes=50 << 20, rng=None):
        """(us per node, mode, nodes): ORT's last-axis Softmax on random rows."""
        rng = rng or np.random.default_rng()
        nodes = node_count(rows * cols * np.dtype(NP_TYPES[dtype]).itemsize, l2_bytes)
        x = (rng.standard_normal((rows, cols), dtype=np.float32) * 3).astype(NP_TYPES[dtype])
        ms, _, mode = self.run(softmax_model(rows, cols, dtype, nodes), {f"x{i}": x for i in range(nodes)},
                               fetch=False)
        return ms * 1e3 / nodes, mode, nodes
