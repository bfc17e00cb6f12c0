"""One error style: every exception class tritonforge defines derives from TritonforgeError, which every
task turns into one line and exit code 1 (runtime errors included: tune, bench)."""

from __future__ import annotations

import importlib
import inspect

from tritonforge.errors import TritonforgeError

from ..conftest import ROOT


def modules():
    for top, package in (("pipeline", "tritonforge.pipeline"), ("runtime", "tritonforge.runtime"),
                         ("tritonforge", "tritonforge")):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "templates" in path.parts:  # files copied into ORT's tree, not modules of ours
                continue
            rel = path.relative_to(ROOT / top).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([package, *parts])


def test_every_error_class_is_a_tritonforge_error():
    found = []
    for name in modules():
        mod = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == mod.__name__ and issubclass(cls, BaseException):
                found.append(cls_name)
                assert issubclass(cls, TritonforgeError), f"{name}.{cls_name}"
    assert {"PipelineError", "CudaError", "Unsupported", "TuneCacheError", "RewriteError", "FormatError"} <= set(found)
