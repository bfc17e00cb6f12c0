"""Kernel parameter ABI: Triton signature types, C struct layout, and the layout a binary declares.

ORT packs a plain C struct of the runtime arguments (natural alignment) and passes it with
CU_LAUNCH_PARAM_BUFFER_POINTER. Triton >= 3.3 appends hidden pointer parameters (global_scratch,
then profile_scratch since 3.5) that the struct must also carry. We read the layout the compiled
binary declares (PTX `.param` list, AMDGPU kernarg metadata) and check it against the layout the
signature implies, so a drift in Triton's ABI fails the build instead of a launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tritonforge.pipeline.errors import PipelineError

SCALAR_SIZES = {
    "i1": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "fp16": 2, "bf16": 2,
    "i32": 4, "u32": 4, "fp32": 4, "i64": 8, "u64": 8, "fp64": 8,
}
# Element types a pointer may point to (Triton's names).
POINTEE_TYPES = set(SCALAR_SIZES) | {"fp8e4nv", "fp8e5", "fp8e4b15", "fp8e4b8", "fp8e5b16"}
POINTER_SIZE = 8
HIDDEN_PARAM_NAMES = ("global_scratch", "profile_scratch")
DIVISIBILITY_CHOICES = (1, 16)


@dataclass(frozen=True)
class ParamType:
    type: str  # Triton type: "*fp16", "i32", ...
    divisibility: int | None = None  # a `:16` hint: the value (or address) is a multiple of 16

    @property
    def is_pointer(self) -> bool:
        return self.type.startswith("*")

    @property
    def size(self) -> int:
        return POINTER_SIZE if self.is_pointer else SCALAR_SIZES[self.type]

    @property
    def c_type(self) -> str:
        if self.is_pointer:
            return "void*"
        return {
            "i1": "bool", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t", "u16": "uint16_t",
            "fp16": "uint16_t", "bf16": "uint16_t", "i32": "int32_t", "u32": "uint32_t",
            "fp32": "float", "i64": "int64_t", "u64": "uint64_t", "fp64": "double",
        }[self.type]

    def __str__(self) -> str:
        return f"{self.type}:{self.divisibility}" if self.divisibility else self.type


def parse_param_type(text: str) -> ParamType:
    """Parse one `sig` item: `*fp16`, `i32`, `*fp32:16` (divisibility hint). Raises ValueError."""
    item = text.strip()
    hint = None
    if ":" in item:
        item, _, h = item.partition(":")
        if not h.isdigit() or int(h) not in DIVISIBILITY_CHOICES:
            raise ValueError(f"bad divisibility hint ':{h}' in '{text.strip()}' (allowed: :16)")
        hint = int(h) if int(h) > 1 else None
    if item.startswith("*"):
        if item[1:] not in POINTEE_TYPES:
            raise ValueError(f"unknown pointer type '{item}'")
    elif item not in SCALAR_SIZES:
        raise ValueError(f"unknown type '{item}'")
    if hint and item in ("i1", "fp16", "bf16", "fp32", "fp64"):
        raise ValueError(f"a divisibility hint needs an integer or pointer, not '{item}'")
    return ParamType(item, hint)


@dataclass(frozen=True)
class Slot:
    offset: int
    size: int


def c_layout(sizes: list[int]) -> tuple[list[Slot], int]:
    """Offsets of a C struct with these naturally aligned fields, and its sizeof (tail padding included)."""
    slots, off, align = [], 0, 1
    for size in sizes:
        off = (off + size - 1) // size * size
        slots.append(Slot(off, size))
        off += size
        align = max(align, size)
    total = (off + align - 1) // align * align if sizes else 0
    return slots, total


_PTX_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\((.*?)\)", re.S)
_PTX_PARAM = re.compile(r"\.param\s+\.(?:[bsuf])(\d+)\b")


def ptx_param_slots(ptx: str, func_name: str) -> list[Slot]:
    """The parameter slots a PTX entry declares, in order."""
    for m in _PTX_ENTRY.finditer(ptx):
        if m.group(1) != func_name:
            continue
        sizes = []
        for line in m.group(2).split(","):
            line = line.strip()
            if not line:
                continue
            pm = _PTX_PARAM.search(line)
            if not pm or ".align" in line and ".ptr" not in line:
                raise PipelineError(f"cannot read PTX parameter '{line}' of {func_name}")
            sizes.append(int(pm.group(1)) // 8)
        return c_layout(sizes)[0]
    raise PipelineError(f"PTX has no entry '{func_name}'")


def amdgpu_arg_slots(amdgcn: str, func_name: str) -> tuple[list[Slot], int]:
    """Explicit kernarg slots from the AMDGPU metadata in Triton's amdgcn text, and the segment size."""
    start = amdgcn.find("amdhsa.kernels:")
    if start < 0:
        raise PipelineError(f"amdgcn has no kernel metadata for {func_name}")
    meta = amdgcn[start:]
    # A Triton module holds one kernel, so the first `.args:` list is its own.
    args_at = meta.find(".args:")
    if args_at < 0:
        return [], 0
    slots: list[Slot] = []
    cur: dict[str, str] = {}

    def flush():
        if cur and not cur.get(".value_kind", "").startswith("hidden_"):
            slots.append(Slot(int(cur[".offset"]), int(cur[".size"])))

    for line in meta[args_at:].splitlines()[1:]:
        s = line.strip()
        if s.startswith("- "):
            flush()
            cur = {}
            s = s[2:].strip()
        elif not line.startswith("      "):  # dedent: end of the .args list
            break
        key, _, val = s.partition(":")
        cur[key.strip()] = val.strip()
    flush()
    seg = re.search(r"\.kernarg_segment_size:\s*(\d+)", meta)
    return slots, int(seg.group(1)) if seg else 0


def describe_layout(params: list[ParamType], declared: list[Slot], kernel: str) -> dict:
    """Check the binary's declared slots against the signature; return runtime + hidden parameter layout."""
    runtime_slots, _ = c_layout([p.size for p in params])
    n = len(params)
    if len(declared) < n:
        raise PipelineError(
            f"binary declares {len(declared)} parameters but the signature has {n}", kernel=kernel)
    for i, (want, got) in enumerate(zip(runtime_slots, declared[:n])):
        if want != got:
            raise PipelineError(
                f"parameter {i} ({params[i]}) is at offset {got.offset} size {got.size} in the binary, "
                f"expected offset {want.offset} size {want.size}", kernel=kernel)
    hidden = declared[n:]
    if len(hidden) > len(HIDDEN_PARAM_NAMES) or any(s.size != POINTER_SIZE for s in hidden):
        raise PipelineError(
            f"unexpected trailing parameters {[(s.offset, s.size) for s in hidden]} after the signature "
            "(this Triton's hidden-parameter ABI is not supported)", kernel=kernel)
    _, args_size = c_layout([s.size for s in declared])
    return {
        "runtime": [{"offset": s.offset, "size": s.size} for s in runtime_slots],
        "hidden": [{"name": HIDDEN_PARAM_NAMES[i], "offset": s.offset, "size": s.size}
                   for i, s in enumerate(hidden)],
        "args_size": args_size,
    }
