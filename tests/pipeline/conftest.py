import pytest

pytest.importorskip("triton", reason="the compile pipeline needs triton (pip install -r pins/triton.txt)")
