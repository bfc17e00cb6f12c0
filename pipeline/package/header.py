"""`triton_kernel_infos.h`, byte for byte in the format ORT's compile_triton.py writes and its loader includes."""

from __future__ import annotations


def _entry(symbol: str, func_name: str, group: str, name: str, num_warps: int, shared: int,
           constants: dict) -> str:
    consts = ", ".join(f'{{ "{k}", {v}}}' for k, v in constants.items())
    fields = [f'"{symbol}"', f'"{func_name}"', f'"{group}"', f'"{name}"', str(num_warps), str(shared),
              f"{{ {consts} }}"]
    return f"{{ {', '.join(fields)} }}"


def render(entries: list[dict]) -> str:
    """entries: dicts with symbol, func_name, group, name, num_warps, shared, constants (table order)."""
    if not entries:
        raise ValueError("ORT's header needs at least one kernel (an empty kernel_infos[] does not compile)")
    body = ", ".join(_entry(e["symbol"], e["func_name"], e["group"], e["name"], e["num_warps"],
                            e["shared"], e["constants"]) for e in entries)
    return (
        "\n#include <unordered_map>\n\n"
        "struct _TritonKernelInfo {\n"
        "  const char* name_start;\n"
        "  const char* func_name;\n"
        "  const char* group_name;\n"
        "  const char* name;\n"
        "  int num_warps;\n"
        "  int shared;\n"
        "  std::unordered_map<std::string, int> constants;\n"
        "};\n\n"
        "const _TritonKernelInfo kernel_infos[] = {\n"
        f"  {body},\n"
        "};\n    "
    )
