"""ONNX Runtime's tools/ci_build/compile_triton.py, replaced by tritonforge's drop-in.

Copy this file over onnxruntime/tools/ci_build/compile_triton.py in an ORT checkout, with tritonforge
installed in the Python that ORT's CMake finds. With TRITONFORGE_STORE, TRITONFORGE_VERSION and
TRITONFORGE_TARGET set, ORT's build fetches and verifies the published build instead of compiling
(python -m tritonforge.pipeline.compile_triton --help).
"""

import sys

from tritonforge.pipeline.compile_triton import main

sys.exit(main())
