"""The library's exported C functions (TritonforgeInfo, TritonforgeChoices) called from 16 threads at once while
sessions with the library's ops are made and run: each call's text whole and the same as one thread's, nothing
crashes. ctypes releases the GIL for the call, so the threads meet inside the library.

Each run is a fresh process with a tune file of many lines named, and every thread makes its first call at one
barrier: the library's first-use work (reading the tune file, making its info text) runs while the others ask for
it, the state the CPU sessions share with the callers too, so the test can fail without a GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("onnxruntime", reason="the sessions run in onnxruntime")
pytest.importorskip("onnx")

THREADS, CALLS, TUNED = 16, 200, 5000

HAMMER = r"""
import json, sys, threading
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper
from tritonforge.runtime import ortlib

lib, providers, tuned = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
THREADS, CALLS = 16, 200
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 4096])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 4096])
graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1, domain="tritonforge")], "t", [x], [y])
# an IR version every supported onnxruntime reads (onnx's newest can be past the installed runtime's)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("tritonforge", 1)],
                          ir_version=9).SerializeToString()
errors, infos = [], []
go = threading.Barrier(THREADS + 2)
stop = threading.Event()

def caller():
    go.wait()
    for i in range(CALLS):
        info = ortlib.info(lib)
        if i == 0:
            infos.append(json.dumps(info, sort_keys=True))
        if info.get("tune_choices") != tuned:
            errors.append(f"TritonforgeInfo said {info.get('tune_choices')} tune choices, not {tuned}")
        rows = ortlib.choices(lib)  # each line parses: a text torn by another thread would not
        if any(set(r) != {"device", "op", "signature", "kernel"} for r in rows):
            errors.append(f"TritonforgeChoices gave {rows}")

def runner():
    v = np.random.default_rng(0).standard_normal((64, 4096)).astype(np.float32)
    want = np.exp(v - v.max(-1, keepdims=True))
    want /= want.sum(-1, keepdims=True)
    go.wait()
    try:
        while not stop.is_set():
            so = ort.SessionOptions()
            so.log_severity_level = 4
            ortlib.register(so, lib)
            sess = ort.InferenceSession(model, so, providers=providers)
            if not np.allclose(sess.run(None, {"x": v})[0], want, rtol=1e-4, atol=1e-6):
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
print(json.dumps({"errors": errors, "infos": sorted(set(infos)), "choices": ortlib.choices(lib)}))
"""


def _hammer(lib, providers, tmp_path) -> dict:
    """The threads above in a fresh process whose tune file holds TUNED choices; what they met."""
    tune = tmp_path / "many.tune"
    tune.write_text("# device, op key, signature, kernel\n" + "".join(
        f"NVIDIA Test\tsoftmax_fp32\t{i}_4096\tsoftmax_fp32_4096\n" for i in range(TUNED)))
    env = {**os.environ, "TRITONFORGE_ORT_TUNE_FILE": str(tune)}
    proc = subprocess.run([sys.executable, "-c", HAMMER, str(lib), ",".join(providers), str(TUNED)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_exported_functions_from_16_threads_while_cpu_sessions_run(ort_library, tmp_path):
    got = _hammer(ort_library, ["CPUExecutionProvider"], tmp_path)
    assert got["errors"] == []
    assert len(got["infos"]) == 1  # every thread's first call, made while the tune file was read, says the same
    assert json.loads(got["infos"][0])["tune_choices"] == TUNED
    assert got["choices"] == []  # the CPU ops choose no kernel


@pytest.mark.gpu
def test_the_exported_functions_from_16_threads_while_cuda_sessions_choose_kernels(ort_cuda, library, tmp_path):
    """On the CUDA EP the sessions add the kernel each shape chose while the callers read the list."""
    got = _hammer(library, ["CUDAExecutionProvider"], tmp_path)
    assert got["errors"] == [] and len(got["infos"]) == 1
    assert any(r["op"].startswith("Softmax") or "softmax" in r["kernel"] for r in got["choices"])
