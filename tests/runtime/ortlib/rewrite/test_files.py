"""Model files of any size: external data read where it lies and written once more beside the output,
byte for byte; bad files get one line naming them; a failed write leaves nothing behind."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the rewrite reads ONNX models")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tritonforge.runtime.ortlib.rewrite import files  # noqa: E402


def _model(n=4096):
    f = TensorProto.FLOAT
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal(n).astype(np.float32), "w")
    small = numpy_helper.from_array(np.arange(4, dtype=np.float32), "small")
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Mul", ["a", "small"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", f, [n])],
                                               [helper.make_tensor_value_info("y", f, [n])], [w, small]),
                             opset_imports=[helper.make_opsetid("", 17)])


def test_external_data_is_read_where_it_lies_and_written_beside_the_output(tmp_path):
    src = tmp_path / "in" / "m.onnx"
    src.parent.mkdir()
    onnx.save(_model(), str(src), save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=1024)
    model, base = files.read(src)
    assert base == src.parent.resolve() and not model.graph.initializer[0].raw_data  # the weights stay on disk
    out = tmp_path / "out" / "m.tf.onnx"
    wrote = files.write(model, out, base)
    assert wrote == [out.with_name("m.tf.onnx.data"), out] and all(p.is_file() for p in wrote)
    back = onnx.load(str(out))
    want = numpy_helper.to_array(onnx.load(str(src)).graph.initializer[0])
    assert numpy_helper.to_array(back.graph.initializer[0]).tobytes() == want.tobytes()
    ext = {e.key: e.value for e in onnx.load(str(out), load_external_data=False).graph.initializer[0].external_data}
    assert ext["location"] == "m.tf.onnx.data" and int(ext["offset"]) % 4096 == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.tf.onnx", "m.tf.onnx.data"]  # no scratch left


def test_a_constants_external_value_is_written_beside_the_output_too(tmp_path):
    """TorchScript's exporter writes a big Constant node's value as a file of its own, as it does initializers."""
    n = 2048
    value = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    m = _model(n)
    m.graph.node.insert(0, helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(value, "c_value")))
    m.graph.node[-1].input[1] = "c"
    m.graph.initializer.pop()  # `small` is not read any more
    src = tmp_path / "in" / "m.onnx"
    src.parent.mkdir()
    onnx.save(m, str(src), save_as_external_data=True, all_tensors_to_one_file=False, size_threshold=1024,
              convert_attribute=True)
    assert "c_value" in {p.name for p in src.parent.iterdir()}  # the Constant's value lives in a file of its own
    model, base = files.read(src)
    out = tmp_path / "out" / "m.tf.onnx"
    files.write(model, out, base)  # onnx.checker reads every tensor the written model names
    back = onnx.load(str(out))
    assert numpy_helper.to_array(back.graph.node[0].attribute[0].t).tobytes() == value.tobytes()
    assert sorted(p.name for p in out.parent.iterdir()) == ["m.tf.onnx", "m.tf.onnx.data"]


def test_the_weights_bytes_are_counted_from_their_dims_without_reading_external_data(tmp_path):
    """What the rewrite keeps of its budget for writing a model grows with its weights, counted without reading them
    (an SDXL UNet's 5 GB stay on disk until written)."""
    m = _model(3000)
    m.graph.node.insert(0, helper.make_node("Constant", [], ["h"], value=numpy_helper.from_array(
        np.zeros(500, np.float16), "h_value")))
    src = tmp_path / "m.onnx"
    onnx.save(m, str(src), save_as_external_data=True, all_tensors_to_one_file=True, location="m.onnx.data",
              size_threshold=0, convert_attribute=True)
    model, _ = files.read(src)
    assert not any(t.raw_data for t in files.tensors(model))  # nothing was read
    assert files.weight_bytes(model) == 3000 * 4 + 4 * 4 + 500 * 2 == (tmp_path / "m.onnx.data").stat().st_size


def test_a_model_too_big_for_one_protobuf_is_written_with_external_data(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_PROTO_LIMIT", 10_000)  # as a 2 GB model is, in miniature
    model = _model()
    wrote = files.write(model, tmp_path / "big.onnx", None)
    assert [p.name for p in wrote] == ["big.onnx.data", "big.onnx"]
    assert (tmp_path / "big.onnx").stat().st_size < 4096 * 4 and (tmp_path / "big.onnx.data").stat().st_size >= 4096 * 4
    onnx.checker.check_model(str(tmp_path / "big.onnx"))


def test_bad_files_get_one_line_naming_them(tmp_path):
    with pytest.raises(files.ModelFileError, match=r"nowhere\.onnx: cannot read an ONNX model: no such file"):
        files.read(tmp_path / "nowhere.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x08\x07junk" * 10)
    with pytest.raises(files.ModelFileError, match=r"junk\.onnx: cannot read an ONNX model"):
        files.read(tmp_path / "junk.onnx")
    src = tmp_path / "m.onnx"
    onnx.save(_model(), str(src), save_as_external_data=True, location="weights.bin", size_threshold=1024)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(files.ModelFileError, match=r"m\.onnx: tensor 'w' lives in the external data file "
                                                   r"'weights.bin', which is not beside it"):
        files.read(src)


def test_a_model_the_checker_refuses_is_not_written(tmp_path):
    model = _model()
    model.graph.node[0].input[1] = "missing"  # reads a value nothing makes
    with pytest.raises(files.ModelFileError, match=r"out\.onnx: the rewritten model does not pass onnx.checker"):
        files.write(model, tmp_path / "out.onnx", None)
    assert list(tmp_path.iterdir()) == []
