"""tritonforge: ahead-of-time compiled Triton kernels for ONNX Runtime.

The one importable package. `tritonforge.pipeline` (reading, compiling, packaging and releasing kernel
scripts) and `tritonforge.runtime` (loading and launching the shipped kernels on a GPU) are the
repository's `pipeline/` and `runtime/` directories: an installed wheel holds them under this package,
and in a checkout (a GPU runner's carried copy, nothing installed) this package finds them beside it.
"""

from __future__ import annotations

import os

__version__ = "0.1.0"

_HERE = os.path.dirname(os.path.abspath(__file__))
_CHECKOUT = os.path.dirname(_HERE)
if not os.path.isdir(os.path.join(_HERE, "pipeline")) and os.path.isfile(
        os.path.join(_CHECKOUT, "pipeline", "__init__.py")):
    __path__.append(_CHECKOUT)  # noqa: F821 (a package's own search path)


def pins_dir() -> str:
    """The project's pins (triton.txt, ort_headers.txt, ...): inside an installed package, else the
    checkout's pins/."""
    inside = os.path.join(_HERE, "pins")
    return inside if os.path.isdir(inside) else os.path.join(_CHECKOUT, "pins")
