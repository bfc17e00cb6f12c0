"""The library's exported C functions (TritonforgeInfo, TritonforgeChoices) called from 16 threads at once while
sessions with the library's ops run: each call's text whole and the same as one thread's, nothing crashes.
ctypes releases the GIL for the call, so the threads meet inside the library."""

from __future__ import annotations

import threading

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="the sessions run in onnxruntime")
pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from tritonforge.runtime import ortlib  # noqa: E402

THREADS, CALLS = 16, 200


def _softmax_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 4096])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 4096])
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1, domain="tritonforge")], "t", [x], [y])
    # an IR version every supported onnxruntime reads (onnx's newest can be past the installed runtime's)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("tritonforge", 1)],
                             ir_version=9)


def _hammer(lib, providers):
    """Run THREADS callers of both functions beside two threads running sessions; the errors any of them met."""
    want_info = ortlib.info(lib)
    errors: list[str] = []
    go = threading.Barrier(THREADS + 2)
    stop = threading.Event()

    def caller():
        go.wait()
        for _ in range(CALLS):
            if ortlib.info(lib) != want_info:
                errors.append("TritonforgeInfo changed")
            rows = ortlib.choices(lib)  # each line parses: a text torn by another thread would not
            if any(set(r) != {"device", "op", "signature", "kernel"} for r in rows):
                errors.append(f"TritonforgeChoices gave {rows}")

    def runner():
        so = ort.SessionOptions()
        so.log_severity_level = 4
        ortlib.register(so, lib)
        x = np.random.default_rng(0).standard_normal((64, 4096)).astype(np.float32)
        want = np.exp(x - x.max(-1, keepdims=True))
        want /= want.sum(-1, keepdims=True)
        go.wait()
        try:
            while not stop.is_set():
                sess = ort.InferenceSession(_softmax_model().SerializeToString(), so, providers=providers)
                if not np.allclose(sess.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-6):
                    errors.append("a session's softmax was wrong")
        except Exception as exc:  # a runner that dies must fail the test, not end quietly
            errors.append(f"a session failed: {str(exc).splitlines()[0][:200]}")

    callers = [threading.Thread(target=caller) for _ in range(THREADS)]
    runners = [threading.Thread(target=runner) for _ in range(2)]
    for t in callers + runners:
        t.start()
    for t in callers:
        t.join()
    stop.set()
    for t in runners:
        t.join()
    return errors


def test_the_exported_functions_from_16_threads_while_cpu_sessions_run(ort_library):
    assert _hammer(ort_library, ["CPUExecutionProvider"]) == []


@pytest.mark.gpu
def test_the_exported_functions_from_16_threads_while_cuda_sessions_choose_kernels(ort_cuda, library):
    """On the CUDA EP the sessions add the kernel each shape chose while the callers read the list."""
    assert _hammer(library, ["CUDAExecutionProvider"]) == []
    assert any(r["op"].startswith("Softmax") or "softmax" in r["kernel"] for r in ortlib.choices(library))
