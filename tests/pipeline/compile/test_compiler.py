"""One table entry compiled for one target with Triton 3.x and no GPU: a cubin for CUDA, a code object for
ROCm, and a record of what the launch needs; a failure names the script, kernel and target."""

from __future__ import annotations

import dataclasses

import pytest
from tritonforge.pipeline.compile.compiler import compile_spec
from tritonforge.pipeline.compile.targets import parse_target
from tritonforge.pipeline.errors import PipelineError
from tritonforge.pipeline.scripts.table import load_table


@pytest.fixture(scope="module")
def softmax_entry(small_scripts):
    table = load_table(small_scripts)
    return next(k for k in table.kernels if k.script.endswith("softmax_triton.py") and k.group == "softmax_fp32")


@pytest.mark.parametrize("arch, elf_machine", [("sm_90", 190), ("gfx942", 224)])  # EM_CUDA, EM_AMDGPU
def test_a_cubin_and_a_code_object_without_a_gpu(softmax_entry, arch, elf_machine):
    binary, record = compile_spec(softmax_entry, parse_target(arch))
    assert binary[:4] == b"\x7fELF" and int.from_bytes(binary[18:20], "little") == elf_machine
    assert record["num_warps"] == softmax_entry.options["num_warps"] and record["shared"] >= 0
    assert record["binary_arch"].startswith(arch) and record["layout"] and record["size"] == len(binary)


def test_a_kernel_that_does_not_compile_is_named(softmax_entry):
    broken = dataclasses.replace(softmax_entry, constants={**softmax_entry.constants, "BLOCK_SIZE": 3})  # not 2^k
    with pytest.raises(PipelineError, match="triton failed to compile") as err:
        compile_spec(broken, parse_target("sm_90"))
    assert softmax_entry.name in str(err.value) and "sm_90" in str(err.value)
