"""GPU timing by CUDA graph replay over rotating buffers.

Capturing R launches into a graph and timing its replay with events removes host launch gaps, so
even 1-2 us kernels are timed as the GPU runs them. Launches rotate over K input/output slots whose
total size exceeds the L2 cache (where memory allows), so a candidate is not flattered by reading
what the previous launch left in L2.
"""

from __future__ import annotations

import statistics

from cuda.bindings import driver as cu

from .cuda import check


class GraphTimer:
    def __init__(self, backend):
        self.backend = backend
        self.stream = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value), "cuStreamCreate")
        self.start = backend.event()
        self.end = backend.event()

    def per_launch_ms(self, body, reps: int, replays: int = 5) -> float:
        """Median over `replays` graph replays of (graph time / reps). `body(stream, i)` issues launch i;
        the driver copies each launch's arguments when it is captured, so body may change them."""
        check(cu.cuStreamBeginCapture(self.stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture")
        try:
            for i in range(reps):
                body(self.stream, i)
        finally:
            graph = check(cu.cuStreamEndCapture(self.stream), "cuStreamEndCapture")
        try:
            graph_exec = check(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
            try:
                check(cu.cuGraphLaunch(graph_exec, self.stream), "cuGraphLaunch")  # warm-up replay
                times = []
                for _ in range(replays):
                    self.backend.record(self.start, self.stream)
                    check(cu.cuGraphLaunch(graph_exec, self.stream), "cuGraphLaunch")
                    self.backend.record(self.end, self.stream)
                    times.append(self.backend.elapsed_ms(self.start, self.end) / reps)
                return statistics.median(times)
            finally:
                check(cu.cuGraphExecDestroy(graph_exec), "cuGraphExecDestroy")
        finally:
            check(cu.cuGraphDestroy(graph), "cuGraphDestroy")

    def copy_bandwidth_gbps(self, nbytes: int = 1 << 30) -> float:
        """Device-to-device copy rate counting bytes read plus written (the bandwidth ceiling)."""
        src, dst = self.backend.alloc(nbytes), self.backend.alloc(nbytes)
        try:
            self.backend.copy_dtod(dst, src, nbytes, self.stream)
            times = []
            for _ in range(10):
                self.backend.record(self.start, self.stream)
                self.backend.copy_dtod(dst, src, nbytes, self.stream)
                self.backend.record(self.end, self.stream)
                times.append(self.backend.elapsed_ms(self.start, self.end))
            return 2 * nbytes / (statistics.median(times) * 1e-3) / 1e9
        finally:
            self.backend.free(src)
            self.backend.free(dst)

    def rotating_copy_ms(self, nbytes: int, reps: int = 200) -> float:
        """ms per device-to-device copy of `nbytes`, timed like a kernel (graph replay over rotating
        buffers larger than L2): the ceiling for one read and one write of a tensor of that size."""
        slots = rotation_slots(2 * nbytes, self.backend.limits["l2_bytes"])
        bufs = [(self.backend.alloc(nbytes), self.backend.alloc(nbytes)) for _ in range(slots)]
        try:
            return self.per_launch_ms(lambda stream, i: self.backend.copy_dtod(*bufs[i % slots], nbytes, stream),
                                      reps)
        finally:
            for pair in bufs:
                for ptr in pair:
                    self.backend.free(ptr)


def rotation_slots(pair_bytes: int, l2_bytes: int, max_slots: int = 256) -> int:
    """How many input/output slot pairs make the rotation span at least 3x the L2 cache."""
    need = -(-3 * l2_bytes // max(pair_bytes, 1))
    return max(1, min(max_slots, need))
