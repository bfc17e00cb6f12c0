"""The header must be byte-identical to what ORT's compile_triton.py writes for the same kernels."""

from tritonforge.pipeline.package import header

# Written out by hand from ORT's f-string: leading newline, one line of entries, trailing "\n    ".
EXPECTED = (
    '\n#include <unordered_map>\n\nstruct _TritonKernelInfo {\n  const char* name_start;\n'
    '  const char* func_name;\n  const char* group_name;\n  const char* name;\n  int num_warps;\n'
    '  int shared;\n  std::unordered_map<std::string, int> constants;\n};\n\n'
    'const _TritonKernelInfo kernel_infos[] = {\n'
    '  { "_binary_softmax_fp16_1024_cubin_start", "softmax_kernel", "softmax_fp16", "softmax_fp16_1024", 4, 512, '
    '{ { "BLOCK_SIZE", 1024} } }, { "_binary_noconst_hsaco_start", "k", "g", "noconst", 1, 0, {  } },\n'
    '};\n    '
)


def test_matches_ort_bytes():
    got = header.render([
        {"symbol": "_binary_softmax_fp16_1024_cubin_start", "func_name": "softmax_kernel",
         "group": "softmax_fp16", "name": "softmax_fp16_1024", "num_warps": 4, "shared": 512,
         "constants": {"BLOCK_SIZE": 1024}},
        {"symbol": "_binary_noconst_hsaco_start", "func_name": "k", "group": "g", "name": "noconst",
         "num_warps": 1, "shared": 0, "constants": {}},
    ])
    assert got == EXPECTED


def test_empty_table_is_refused():
    import pytest

    with pytest.raises(ValueError, match="at least one kernel"):
        header.render([])
