"""benchmarks/pin_bench.py as typed: bad arguments refused before any GPU is touched (the comparison itself is
tritonforge.runtime.build_speed's, tested in tests/runtime/test_build_speed.py)."""

from __future__ import annotations

import subprocess
import sys

from benchmarks import pin_bench


def test_bad_arguments_are_refused_before_any_gpu_is_touched():
    for args, message in ((["--model", "gpt5"], "unknown model 'gpt5'"), (["--dtypes", "fp8"], "--dtypes fp16,fp32"),
                          (["--where", "("], "--where '('")):
        proc = subprocess.run([sys.executable, "benchmarks/pin_bench.py", "--current", "a", "--candidate", "b", *args],
                              cwd=pin_bench.ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
