"""Tests' one run of a model in onnxruntime: the library registered where given, random inputs (symbolic dims at 1),
the first output as float64."""

from __future__ import annotations

import numpy as np


def run_once(model, lib=None, providers=("CPUExecutionProvider",)) -> np.ndarray:
    """`model` (a ModelProto or a path) run once on `providers` with inputs drawn from seed 0."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    if lib:
        so.register_custom_ops_library(str(lib))
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else str(model)
    s = ort.InferenceSession(source, so, providers=list(providers))
    rng = np.random.default_rng(0)
    feeds = {}
    for i in s.get_inputs():
        dt = {"tensor(float16)": np.float16, "tensor(int64)": np.int64}.get(i.type, np.float32)
        feeds[i.name] = rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(dt)
    return s.run(None, feeds)[0].astype(np.float64)
