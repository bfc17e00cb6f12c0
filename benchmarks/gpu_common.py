"""What the GPU benchmarks share: opening the device with its artifacts and copy ceiling, and timing a
torch baseline the same way our kernels are timed (CUDA-graph replay, median of 5 replays)."""

from __future__ import annotations

import statistics
from pathlib import Path


def open_gpu(dist: str | Path):
    """(backend, registry, timer, copy GB/s) for GPU 0 and its arch's artifacts under dist/."""
    from tritonforge.runtime import load_artifacts
    from tritonforge.runtime.cuda import CudaBackend
    from tritonforge.runtime.registry import Registry
    from tritonforge.runtime.timing import GraphTimer

    backend = CudaBackend(0)
    registry = Registry(load_artifacts(Path(dist) / "cuda" / f"sm_{backend.arch}"), backend)
    timer = GraphTimer(backend)
    ceiling = timer.copy_bandwidth_gbps()
    print(f"{backend.device_name}: device-to-device copy {ceiling:.1f} GB/s (read + write)", flush=True)
    return backend, registry, timer, ceiling


def torch_graph_ms(fn, inputs: list, reps: int) -> float:
    """Median ms per call of fn(x) over `reps` calls cycling through inputs, captured in a CUDA graph."""
    import torch

    for x in inputs[:2]:
        fn(x)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        for i in range(reps):
            fn(inputs[i % len(inputs)])
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    del graph
    torch.cuda.empty_cache()
    return statistics.median(times)
