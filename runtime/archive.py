"""Read blobs out of a static archive the way the linker and dlsym would find them.

Pure Python: GNU `ar` members, ELF64 relocatable objects, their symbol tables. A symbol pair
`X_start`/`X_end` in one section gives the blob's bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

from tritonforge.errors import TritonforgeError

AR_MAGIC = b"!<arch>\n"


class ArchiveFormatError(TritonforgeError, ValueError):
    pass


def ar_members(data: bytes) -> list[tuple[str, bytes]]:
    """(name, bytes) of each regular member, in archive order (symbol and name tables skipped)."""
    if not data.startswith(AR_MAGIC):
        raise ArchiveFormatError("not an ar archive")
    pos, long_names, out = len(AR_MAGIC), b"", []
    while pos + 60 <= len(data):
        hdr = data[pos:pos + 60]
        if hdr[58:60] != b"`\n":
            raise ArchiveFormatError(f"bad member header at offset {pos}")
        raw_name = hdr[:16].decode().rstrip()
        size = int(hdr[48:58].decode().strip())
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size & 1)
        if raw_name in ("/", "/SYM64/"):
            continue
        if raw_name == "//":
            long_names = body
            continue
        if raw_name.startswith("/") and raw_name[1:].isdigit():
            off = int(raw_name[1:])
            end = long_names.index(b"/\n", off)
            name = long_names[off:end].decode()
        else:
            name = raw_name.rstrip("/")
        out.append((name, body))
    return out


def elf_symbols(obj: bytes) -> dict[str, bytes]:
    """Map symbol name -> bytes from `<name>_start` to `<name>_end` for every start/end pair in `obj`."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise ArchiveFormatError("not a little-endian ELF64 object")
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", obj, 0x3A)
    sections = []
    for i in range(shnum):
        name, stype, _flags, _addr, offset, size, link, _info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", obj, shoff + i * shentsize)
        sections.append((name, stype, offset, size, link, entsize))
    symbols: dict[str, tuple[int, int]] = {}
    for _name, stype, offset, size, link, entsize in sections:
        if stype != 2:  # SHT_SYMTAB
            continue
        str_off = sections[link][2]
        for j in range(size // entsize):
            st_name, _st_info, _st_other, st_shndx, st_value, _st_size = struct.unpack_from(
                "<IBBHQQ", obj, offset + j * entsize)
            end = obj.index(b"\0", str_off + st_name)
            symbols[obj[str_off + st_name:end].decode()] = (st_shndx, st_value)
    blobs = {}
    for sym, (shndx, start) in symbols.items():
        if not sym.endswith("_start"):
            continue
        base = sym[:-len("_start")]
        end_sym = symbols.get(f"{base}_end")
        if end_sym is None or end_sym[0] != shndx or shndx == 0 or shndx >= len(sections):
            continue
        sec_off = sections[shndx][2]
        blobs[sym] = obj[sec_off + start:sec_off + end_sym[1]]
    return blobs


def read_archive_symbols(path: Path | str) -> dict[str, bytes]:
    """Every `*_start` blob defined in the archive, by symbol name."""
    out: dict[str, bytes] = {}
    for member, body in ar_members(Path(path).read_bytes()):
        try:
            found = elf_symbols(body)
        except (ArchiveFormatError, struct.error, ValueError, IndexError) as exc:
            raise ArchiveFormatError(f"{path}: member {member}: {exc}") from None
        for sym, blob in found.items():
            if sym in out:
                raise ArchiveFormatError(f"{path}: symbol {sym} defined twice")
            out[sym] = blob
    return out
