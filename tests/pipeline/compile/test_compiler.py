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


def test_the_shipped_ptx_is_checked_once_and_made_portable(softmax_entry, tmp_path, monkeypatch):
    """A build keeps Triton's sm_90a PTX; made portable it targets sm_90 once ptxas took it, and the verdict
    kept in `checks` answers the next merge of the same PTX without running ptxas again."""
    import re

    from tritonforge.pipeline.compile import compiler

    _, record = compile_spec(softmax_entry, parse_target("sm_90"))
    assert record["ptx_target"] == "sm_90a" and re.search(r"^\.target sm_90a$", record["ptx"], re.M)
    text, target, why = compiler.portable_ptx(record["ptx"], softmax_entry.name, tmp_path)
    assert (target, why) == ("sm_90", "") and re.search(r"^\.target sm_90$", text, re.M)
    assert len(list(tmp_path.glob("*.json"))) == 1
    def no_ptxas(*args, **kwargs):
        raise AssertionError("ptxas ran")

    monkeypatch.setattr(compiler.subprocess, "run", no_ptxas)
    assert compiler.portable_ptx(record["ptx"], softmax_entry.name, tmp_path) == (text, "sm_90", "")
    with pytest.raises(AssertionError, match="ptxas ran"):  # no verdict kept there: ptxas runs
        compiler.portable_ptx(record["ptx"], softmax_entry.name, tmp_path / "elsewhere")
