"""The pipeline's errors name what is at fault and are tritonforge errors, so every task prints them as one line."""

from __future__ import annotations

from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.release.stores import Conflict

from tritonforge.errors import TritonforgeError


def test_an_error_names_script_kernel_and_target():
    exc = PipelineError("triton failed", script="kernels/x.py", kernel="x_fp16", target="sm_90")
    assert str(exc) == "kernels/x.py: kernel 'x_fp16': target sm_90: triton failed"
    assert str(PipelineError("plain")) == "plain"
    assert isinstance(exc, TritonforgeError) and issubclass(Conflict, PipelineError)
