"""ONNX model files of any size: read without their external data, write with it.

A model over protobuf's 2 GB keeps its weights in external data files (torch.onnx writes one per tensor
or one for all). `read` loads the graph alone and checks that every external file is there; the
matchers read the few small tensors they need through the model's directory. `write` puts the model at
`dst` and, when the source kept external data (or the result would not fit one protobuf), every tensor
over 1 KiB into one file beside it, `<dst name>.data`, copying the weights' bytes as they are. Both files
are written in a scratch directory beside `dst` and renamed into place only after the written model
passes onnx.checker (path-based, which reads models of any size) and the caller's own check (the rewrite:
onnxruntime loads it), the data file first.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import TritonforgeError

_PROTO_LIMIT = 2**31 - 2**26  # protobuf's 2 GiB, less room for the graph itself
_EXTERNAL_FROM = 1024  # bytes: tensors this size and up go to the data file, as onnx's own writer does
_ALIGN = 4096  # data file offsets, so that ORT can map tensors from it


class ModelFileError(TritonforgeError, ValueError):
    pass


def _external(t) -> dict | None:
    import onnx

    if t.data_location != onnx.TensorProto.EXTERNAL:
        return None
    return {e.key: e.value for e in t.external_data}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def weight_bytes(model) -> int:
    """The bytes the model's tensors hold, from their types and dims (external data is not read)."""
    import math

    from onnx import helper

    total = 0
    for t in tensors(model):
        try:
            size = helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        except (KeyError, TypeError, ValueError):  # a type numpy has no dtype for
            size = 1
        total += size * math.prod(t.dims)
    return total


def tensors(model):
    """Every tensor the model holds: initializers and the tensors of node attributes (a Constant's value, which
    TorchScript's exporter also writes as external data), subgraphs' included."""
    from .graph import subgraphs

    def walk(graph):
        yield from graph.initializer
        for node in graph.node:
            for a in node.attribute:
                if a.HasField("t"):
                    yield a.t
                yield from a.tensors
        for sub in subgraphs(graph.node):
            yield from walk(sub)

    yield from walk(model.graph)


def read(src: str | os.PathLike):
    """(model without its external data loaded, the directory its external data lives in)."""
    import onnx

    src = Path(src)
    try:
        model = onnx.load(str(src), load_external_data=False)
    except FileNotFoundError:
        raise ModelFileError(f"{src}: cannot read an ONNX model: no such file") from None
    except Exception as exc:
        raise ModelFileError(f"{src}: cannot read an ONNX model: {_first_line(exc)}") from None
    if not model.graph.node and not model.graph.output:
        raise ModelFileError(f"{src}: cannot read an ONNX model: it holds no graph")
    base = src.resolve().parent
    for t in tensors(model):
        ext = _external(t)
        if ext is not None and not (base / ext.get("location", "")).is_file():
            raise ModelFileError(f"{src}: tensor '{t.name}' lives in the external data file "
                                 f"'{ext.get('location')}', which is not beside it")
    return model, base


def write(model, dst: str | os.PathLike, base_dir: str | os.PathLike | None, check: bool = True,
          verify=None) -> list[Path]:
    """Write `model` to `dst` (and `<dst>.data` where it needs one); returns the files written. The
    model's tensors are changed in place to point into the data file. `verify(path)`, when given, is called
    on the written model in its scratch directory and raises to keep it from being renamed into place."""
    dst = Path(dst)
    every = list(tensors(model))
    external = any(_external(t) is not None for t in every) or model.ByteSize() > _PROTO_LIMIT
    files = [dst.with_name(dst.name + ".data"), dst] if external else [dst]
    dst.parent.mkdir(parents=True, exist_ok=True)
    # Both files under their final names in a scratch directory beside dst: the model names its data
    # file, and the checker reads it from there.
    scratch = Path(tempfile.mkdtemp(prefix=f".{dst.name}.tmp-", dir=dst.parent))
    try:
        if external:
            _write_data(every, scratch / files[0].name, files[0].name,
                        Path(base_dir) if base_dir else dst.parent)
        (scratch / dst.name).write_bytes(model.SerializeToString())
        if check:
            _check(scratch / dst.name, dst)
        if verify is not None:
            verify(scratch / dst.name)
        for f in files:
            os.replace(scratch / f.name, f)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return files


def _write_data(every: list, part: Path, location: str, base: Path) -> None:
    """Every tensor of 1 KiB and up into `part`, which will be named `location` beside the model."""
    import onnx
    from onnx import numpy_helper

    with open(part, "xb") as out:
        for t in every:
            ext = _external(t)
            if ext is None and t.ByteSize() < _EXTERNAL_FROM:
                continue
            out.seek(-out.tell() % _ALIGN, os.SEEK_CUR)
            offset = out.tell()
            if ext is not None:
                with open(base / ext["location"], "rb") as src:
                    src.seek(int(ext.get("offset", 0)))
                    length = int(ext["length"]) if "length" in ext else None
                    _copy(src, out, length)
            else:
                out.write(t.raw_data if t.HasField("raw_data") else
                          numpy_helper.from_array(numpy_helper.to_array(t)).raw_data)
            length = out.tell() - offset
            t.ClearField("raw_data")
            for field in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
                t.ClearField(field)
            del t.external_data[:]
            t.data_location = onnx.TensorProto.EXTERNAL
            for k, v in (("location", location), ("offset", str(offset)), ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = k, v


def _copy(src, out, length: int | None, chunk: int = 64 << 20) -> None:
    while length is None or length > 0:
        block = src.read(chunk if length is None else min(chunk, length))
        if not block:
            break
        out.write(block)
        if length is not None:
            length -= len(block)


def _check(path: Path, shown: Path) -> None:
    import onnx

    try:
        onnx.checker.check_model(str(path))
    except onnx.checker.ValidationError as exc:
        raise ModelFileError(f"{shown}: the rewritten model does not pass onnx.checker: {_first_line(exc)}") from None
