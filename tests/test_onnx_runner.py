"""tinycore.onnx on hand-built graphs: hostile files are refused with the file's own terms (sizes, paths), external data is
memory-mapped, bad inputs name the input, unsupported ops name the op, and a run is lazy and replays under TinyJit."""
import os
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="tinycore.onnx needs the onnx package (pip install 'tinycore[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tinycore.errors import CorruptFileError  # noqa: E402
from tinycore.onnx import OnnxRunner, UnsupportedOpError, load  # noqa: E402

def _model(nodes, inputs, outputs, inits=(), opset=17):
  g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])

def _linear_model(w: np.ndarray):
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", w.shape[0]])
  y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", w.shape[1]])
  return _model([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], [x], [y],
                [numpy_helper.from_array(w, "w")])

def _save_external(m, d, location="w.bin"):
  path = os.path.join(d, "m.onnx")
  onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=location, size_threshold=0)
  return path

def test_raw_data_length_must_match_dims():
  m = _linear_model(np.ones((4, 3), np.float32))
  m.graph.initializer[0].raw_data = m.graph.initializer[0].raw_data[:-4]   # one float short
  with pytest.raises(CorruptFileError, match=r"'w' raw_data has 44 bytes.*need 48"):
    load(m.SerializeToString())

def test_garbage_file_is_a_corrupt_file(tmp_path):
  p = tmp_path / "bad.onnx"
  p.write_bytes(b"\xff\xfe not a protobuf \x00" * 10)
  with pytest.raises(CorruptFileError):
    load(str(p))

def test_external_data_is_memory_mapped(tmp_path):
  w = np.arange(12, dtype=np.float32).reshape(4, 3)
  path = _save_external(_linear_model(w), str(tmp_path))
  lm = load(path)
  assert isinstance(lm.weights["w"], np.memmap)
  np.testing.assert_array_equal(lm.weights["w"], w)

@pytest.mark.parametrize("location", ["../outside.bin", "/etc/passwd", "sub/../../x.bin"])
def test_external_data_cannot_leave_the_model_folder(tmp_path, location):
  path = _save_external(_linear_model(np.ones((4, 3), np.float32)), str(tmp_path))
  m = onnx.load(path, load_external_data=False)
  for e in m.graph.initializer[0].external_data:
    if e.key == "location": e.value = location
  onnx.save_model(m, path)
  with pytest.raises(CorruptFileError, match="external data"):
    load(path)

def test_external_data_symlink_out_of_folder_is_refused(tmp_path):
  outside = tmp_path / "secret.bin"
  outside.write_bytes(b"\0" * 48)
  d = tmp_path / "model"; d.mkdir()
  path = _save_external(_linear_model(np.ones((4, 3), np.float32)), str(d))
  os.remove(d / "w.bin"); os.symlink(outside, d / "w.bin")
  with pytest.raises(CorruptFileError, match="outside the model's folder"):
    load(path)

def test_external_data_shorter_than_declared(tmp_path):
  path = _save_external(_linear_model(np.ones((4, 3), np.float32)), str(tmp_path))
  with open(tmp_path / "w.bin", "r+b") as f: f.truncate(20)
  with pytest.raises(CorruptFileError, match=r"needs bytes 0\.\.48.*which has 20"):
    load(path)

def test_unsupported_op_is_named():
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
  m = _model([helper.make_node("StringNormalizer", ["x"], ["y"])], [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
  with pytest.raises(UnsupportedOpError, match="StringNormalizer"):
    OnnxRunner(m)

@pytest.mark.needs_device
def test_wrong_input_shape_and_dtype_name_the_input():
  r = OnnxRunner(_linear_model(np.ones((4, 3), np.float32)))
  with pytest.raises(ValueError, match=r"input 'x' has shape \(2, 5\), the model declares \('batch', 4\)"):
    r({"x": np.zeros((2, 5), np.float32)})
  with pytest.raises(TypeError, match="input 'x' must be float"):
    r({"x": np.zeros((2, 4), np.int32)})
  with pytest.raises(ValueError, match="missing input"):
    r({})

@pytest.mark.needs_device
def test_lazy_and_jittable_with_dynamic_batch():
  from tinycore import Tensor, TinyJit
  rng = np.random.default_rng(0)
  w = rng.standard_normal((4, 3)).astype(np.float32)
  r = OnnxRunner(_linear_model(w))
  out = r({"x": Tensor(np.ones((2, 4), np.float32))})["y"]
  assert not out.is_realized()   # nothing ran yet
  jit = TinyJit(lambda x: r({"x": x})["y"].realize())
  for i in range(4):
    x = rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(jit(Tensor(x)).numpy(), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)
  assert jit.captured is not None   # replayed, not re-traced
  # another batch size (the declared dim is a named dynamic axis) runs too, outside the capture
  x = rng.standard_normal((3, 4)).astype(np.float32)
  np.testing.assert_allclose(r({"x": x})["y"].numpy(), np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)

@pytest.mark.needs_device
def test_shape_arithmetic_folds_on_the_host():
  # Shape -> Gather -> Unsqueeze -> Concat -> Reshape: the shape chain is numpy, only the Reshape is a Tensor op
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
  y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 12])
  nodes = [helper.make_node("Shape", ["x"], ["s"]),
           helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
           helper.make_node("Unsqueeze", ["b", "zero1"], ["b1"]),
           helper.make_node("Concat", ["b1", "minus1"], ["shape"], axis=0),
           helper.make_node("Reshape", ["x", "shape"], ["y"])]
  inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"), numpy_helper.from_array(np.array([0], np.int64), "zero1"),
           numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
  r = OnnxRunner(_model(nodes, [x], [y], inits))
  a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  np.testing.assert_array_equal(r({"x": a})["y"].numpy(), a.reshape(2, 12))

@pytest.mark.needs_device
def test_if_picks_the_branch_from_a_static_condition():
  def branch(name, value):
    out = helper.make_tensor_value_info(name, TensorProto.FLOAT, [2])
    return helper.make_graph([helper.make_node("Mul", ["x", name + "_c"], [name])], name, [], [out],
                             initializer=[numpy_helper.from_array(np.array([value] * 2, np.float32), name + "_c")])
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
  y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
  nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=branch("t", 2.0), else_branch=branch("e", -1.0))]
  for cond, want in ((True, [2.0, 4.0]), (False, [-1.0, -2.0])):
    r = OnnxRunner(_model(nodes, [x], [y], [numpy_helper.from_array(np.array(cond), "cond")]))
    np.testing.assert_array_equal(r({"x": np.array([1, 2], np.float32)})["y"].numpy(), want)

@pytest.mark.needs_device
def test_benchmark_cli_prints_percentiles(tmp_path, capsys):
  from tinycore.onnx.__main__ import main
  path = str(tmp_path / "lin.onnx")
  onnx.save_model(_linear_model(np.ones((4, 3), np.float32)), path)
  assert main([path, "--benchmark", "-n", "5", "--warmup", "1", "--dim", "batch=2"]) == 0
  out = capsys.readouterr().out
  assert "5 runs on" in out and all(k in out for k in ("p50", "p90", "p99"))
  assert main([path, "--dim", "batch=3"]) == 0
  assert "y: shape (3, 3) float" in capsys.readouterr().out
