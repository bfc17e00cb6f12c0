"""What differs between the Triton releases the compiler supports (3.5.0 to 3.9.0), in one place, asked
of the installed Triton by what it offers rather than by its version string.

- `ptxas(arch)`: 3.9 keeps two ptxas binaries and `get_ptxas(arch)` picks one per arch (`ptxas-blackwell`
  from sm_90 on); earlier releases have one and `get_ptxas()` takes no argument.
- `cluster_dims(metadata)`: until 3.8 a compiled kernel's metadata carries `cluster_dims`; 3.9 dropped it
  (a kernel of one CTA per cluster has no cluster: `num_ctas` says it).
- `compile_options(options)`: 3.9 warns that it will stop fusing multiplies and adds by default in 3.10;
  every build states the fusion it was made with (Triton's long-standing default: on) unless the kernel
  script chose, so the bytes do not move with that default.
"""

from __future__ import annotations

import inspect


def ptxas(arch: int) -> str:
    """The ptxas Triton itself would run for sm_<arch> (a CUDA merge checks the PTX it ships with it)."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas
    except ImportError:
        from tritonforge.pipeline.errors import PipelineError

        raise PipelineError("checking CUDA PTX needs the ptxas the pinned triton ships: pip install -r "
                            "pins/triton.txt (scripts/setup does)") from None

    takes_arch = bool(inspect.signature(get_ptxas).parameters)
    return (get_ptxas(arch) if takes_arch else get_ptxas()).path


def cluster_dims(metadata) -> tuple[int, int, int]:
    dims = getattr(metadata, "cluster_dims", None)
    if dims is not None:
        return tuple(int(d) for d in dims)
    return (int(getattr(metadata, "num_ctas", 1) or 1), 1, 1)


def compile_options(options: dict) -> dict:
    return {"enable_fp_fusion": True, **options}
