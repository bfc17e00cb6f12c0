"""Malformed kernel scripts, each with the words its error must contain.

Every case is written to its own file and compiled through the ORT drop-in CLI; the test checks the
exit code, the message (naming script and kernel) and that no output file appears.
"""

KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def copy_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(in_ptr + offs, mask=offs < n), mask=offs < n)

'''


def table(entry: str) -> str:
    return KERNEL + f"\ndef get_function_table():\n    return [{entry}]\n"


GOOD = ('{"name": "copy_fp32", "group": "copy_fp32", "func": copy_kernel, "sig": "*fp32,*fp32,i32", '
        '"kwargs": {"num_warps": 4, "constants": {"BLOCK": 256}}}')


def bad(**override) -> str:
    """GOOD with some fields replaced by Python source snippets."""
    fields = {"name": '"copy_fp32"', "group": '"copy_fp32"', "func": "copy_kernel", "sig": '"*fp32,*fp32,i32"',
              "kwargs": '{"num_warps": 4, "constants": {"BLOCK": 256}}'}
    fields.update(override)
    body = ", ".join(f'"{k}": {v}' for k, v in fields.items() if v is not None)
    return table("{" + body + "}")


CASES = {
    "no_table": (KERNEL, ["no_table.py", "get_function_table"]),
    "misspelt_table": (KERNEL + "\ndef get_funcion_table():\n    return []\n",
                       ["misspelt_table.py", "get_funcion_table"]),
    "import_error": ("import triton\nraise RuntimeError('broken on purpose')\n",
                     ["import_error.py", "import failed", "broken on purpose"]),
    "table_raises": (KERNEL + "\ndef get_function_table():\n    return 1 / 0\n",
                     ["table_raises.py", "ZeroDivisionError"]),
    "empty_table": (table(""), ["empty_table.py", "no kernels"]),
    "missing_keys": (bad(sig=None), ["missing_keys.py", "copy_fp32", "missing keys ['sig']"]),
    "unknown_key": (bad(extra="1"), ["unknown_key.py", "copy_fp32", "unknown keys ['extra']"]),
    "duplicate_names": (table(GOOD + ", " + GOOD), ["duplicate_names.py", "copy_fp32", "duplicate"]),
    "bad_chars": (bad(name='"copy-fp32.v2"'), ["bad_chars.py", "copy-fp32.v2", "[A-Za-z0-9_]"]),
    "sig_mismatch": (bad(sig='"*fp32,*fp32"'), ["sig_mismatch.py", "copy_fp32", "2 types", "3 runtime"]),
    "sig_unknown_type": (bad(sig='"*fp32,*float,i32"'), ["sig_unknown_type.py", "copy_fp32", "*float"]),
    "bool_constant": (bad(kwargs='{"num_warps": 4, "constants": {"BLOCK": True}}'),
                      ["bool_constant.py", "copy_fp32", "BLOCK=True", "bool"]),
    "float_constant": (bad(kwargs='{"num_warps": 4, "constants": {"BLOCK": 256.0}}'),
                       ["float_constant.py", "copy_fp32", "BLOCK=256.0", "float"]),
    "missing_constant": (bad(kwargs='{"num_warps": 4, "constants": {}}'),
                         ["missing_constant.py", "copy_fp32", "constexpr", "BLOCK"]),
    "bad_num_warps": (bad(kwargs='{"num_warps": 3, "constants": {"BLOCK": 256}}'),
                      ["bad_num_warps.py", "copy_fp32", "num_warps=3", "power of two"]),
    "too_many_warps": (bad(kwargs='{"num_warps": 64, "constants": {"BLOCK": 256}}'),
                       ["too_many_warps.py", "copy_fp32", "2048 threads"]),
    "not_jit": (bad(func="print"), ["not_jit.py", "copy_fp32", "@triton.jit"]),
    "constexpr_first": (KERNEL.replace("out_ptr, in_ptr, n, BLOCK: tl.constexpr",
                                       "BLOCK: tl.constexpr, out_ptr, in_ptr, n")
                        + "\ndef get_function_table():\n    return [" + GOOD + "]\n",
                        ["constexpr_first.py", "copy_fp32", "after all runtime"]),
    "triton_failure": (KERNEL.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK) + undefined_name")
                       + "\ndef get_function_table():\n    return [" + GOOD + "]\n",
                       ["triton_failure.py", "copy_fp32", "sm_90", "undefined_name"]),
    "non_pow2_block": (bad(kwargs='{"num_warps": 4, "constants": {"BLOCK": 100}}'),
                       ["non_pow2_block.py", "copy_fp32", "triton failed", "power of 2"]),
}
