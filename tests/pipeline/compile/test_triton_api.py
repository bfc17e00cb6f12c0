"""What differs between Triton releases is asked of the installed one: its ptxas for an arch, a compiled
kernel's cluster, the options every build states."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

pytest.importorskip("triton", reason="the compiler is Triton's")

from tritonforge.pipeline.compile import triton_api  # noqa: E402


@pytest.mark.parametrize("arch", [80, 90, 100, 120])
def test_ptxas_is_the_one_triton_runs_for_the_arch(arch):
    path = triton_api.ptxas(arch)
    assert os.access(path, os.X_OK) and os.path.basename(path).startswith("ptxas")


def test_a_kernel_without_cluster_dims_has_the_cluster_its_ctas_make():
    assert triton_api.cluster_dims(SimpleNamespace(cluster_dims=[2, 1, 1], num_ctas=2)) == (2, 1, 1)
    assert triton_api.cluster_dims(SimpleNamespace(num_ctas=1)) == (1, 1, 1)  # Triton 3.9's metadata
    assert triton_api.cluster_dims(SimpleNamespace(num_ctas=4)) == (4, 1, 1)


def test_every_build_states_fp_fusion_unless_the_script_chose():
    assert triton_api.compile_options({"num_warps": 4}) == {"enable_fp_fusion": True, "num_warps": 4}
    assert triton_api.compile_options({"enable_fp_fusion": False})["enable_fp_fusion"] is False
