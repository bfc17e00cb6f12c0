"""Read an AMD code object's kernel argument layout from its NT_AMDGPU_METADATA note (msgpack).

This is what a HIP launcher must match when it packs the argument buffer; it lets the ROCm side of
the artifacts be checked on a machine with no AMD GPU.
"""

from __future__ import annotations

import struct

NT_AMDGPU_METADATA = 32


def _msgpack(data: bytes, pos: int = 0):
    """Decode one msgpack value at pos; returns (value, next_pos). Covers what AMDGPU metadata uses."""
    b = data[pos]
    pos += 1
    if b <= 0x7F:
        return b, pos
    if 0x80 <= b <= 0x8F:
        return _map(data, pos, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _array(data, pos, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return data[pos:pos + n].decode(), pos + n
    if b >= 0xE0:
        return b - 0x100, pos
    simple = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in simple:
        return simple[b], pos
    fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i",
             0xD3: ">q", 0xCA: ">f", 0xCB: ">d"}
    if b in fixed:
        f = fixed[b]
        return struct.unpack_from(f, data, pos)[0], pos + struct.calcsize(f)
    strs = {0xD9: ">B", 0xDA: ">H", 0xDB: ">I", 0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}
    if b in strs:
        f = strs[b]
        n = struct.unpack_from(f, data, pos)[0]
        pos += struct.calcsize(f)
        raw = data[pos:pos + n]
        return (raw.decode() if b >= 0xD9 else raw), pos + n
    if b in (0xDC, 0xDD):
        f = ">H" if b == 0xDC else ">I"
        n = struct.unpack_from(f, data, pos)[0]
        return _array(data, pos + struct.calcsize(f), n)
    if b in (0xDE, 0xDF):
        f = ">H" if b == 0xDE else ">I"
        n = struct.unpack_from(f, data, pos)[0]
        return _map(data, pos + struct.calcsize(f), n)
    raise ValueError(f"unsupported msgpack byte 0x{b:02x} at {pos - 1}")


def _array(data, pos, n):
    out = []
    for _ in range(n):
        v, pos = _msgpack(data, pos)
        out.append(v)
    return out, pos


def _map(data, pos, n):
    out = {}
    for _ in range(n):
        k, pos = _msgpack(data, pos)
        v, pos = _msgpack(data, pos)
        out[k] = v
    return out, pos


def amdgpu_metadata(hsaco: bytes) -> dict:
    """The decoded NT_AMDGPU_METADATA note of an AMDGPU ELF code object."""
    if hsaco[:4] != b"\x7fELF" or struct.unpack_from("<H", hsaco, 18)[0] != 224:
        raise ValueError("not an AMDGPU ELF code object")
    phoff, = struct.unpack_from("<Q", hsaco, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", hsaco, 0x36)
    for i in range(phnum):
        p_type, _flags, p_offset, _va, _pa, p_filesz = struct.unpack_from("<IIQQQQ", hsaco, phoff + i * phentsize)
        if p_type != 4:  # PT_NOTE
            continue
        pos, end = p_offset, p_offset + p_filesz
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", hsaco, pos)
            name_at = pos + 12
            desc_at = name_at + (namesz + 3) // 4 * 4
            if ntype == NT_AMDGPU_METADATA and hsaco[name_at:name_at + namesz].rstrip(b"\0") == b"AMDGPU":
                return _msgpack(hsaco[desc_at:desc_at + descsz])[0]
            pos = desc_at + (descsz + 3) // 4 * 4
    raise ValueError("no AMDGPU metadata note")


def kernarg_layout(hsaco: bytes, func_name: str) -> dict:
    """{'args': [{offset, size, value_kind}], 'segment_size', 'wavefront_size', 'max_flat_workgroup_size'}."""
    for k in amdgpu_metadata(hsaco)["amdhsa.kernels"]:
        if k[".name"] == func_name:
            return {"args": [{"offset": a[".offset"], "size": a[".size"], "value_kind": a[".value_kind"]}
                             for a in k.get(".args", [])],
                    "segment_size": k[".kernarg_segment_size"],
                    "wavefront_size": k[".wavefront_size"],
                    "max_flat_workgroup_size": k[".max_flat_workgroup_size"]}
    raise KeyError(f"no kernel {func_name!r} in the code object")
