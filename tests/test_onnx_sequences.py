"""Sequence ops (seq(tensor) values as lists): the onnx package's node tests have no case with tensor-only inputs and
outputs for them, so these hand-built graphs check them against numpy, and bad positions name the op."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="tinycore.onnx needs the onnx package (pip install 'tinycore[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tinycore.onnx import OnnxRunner  # noqa: E402

def _const(name, v): return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v), name))

def _run(nodes, inputs, outputs, feeds):
  g = helper.make_graph(nodes, "seq", inputs, outputs)
  m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
  return OnnxRunner(m)(feeds)

def _vi(name, shape, t=TensorProto.FLOAT): return helper.make_tensor_value_info(name, t, shape)

@pytest.mark.needs_device
def test_split_insert_erase_at_concat():
  x = np.arange(24, dtype=np.float32).reshape(6, 4)
  y = np.full((1, 4), -1, np.float32)
  nodes = [
    _const("two", np.array(2, np.int64)), _const("one", np.array(1, np.int64)), _const("neg", np.array(-1, np.int64)),
    helper.make_node("SplitToSequence", ["x", "two"], ["s"], axis=0),            # 3 chunks of (2, 4)
    helper.make_node("SequenceInsert", ["s", "y", "one"], ["s2"]),               # y at position 1
    helper.make_node("SequenceErase", ["s2", "neg"], ["s3"]),                    # drop the last chunk
    helper.make_node("SequenceLength", ["s3"], ["n"]),
    helper.make_node("SequenceAt", ["s3", "neg"], ["last"]),
    helper.make_node("ConcatFromSequence", ["s3"], ["cat"], axis=0),
    helper.make_node("SplitToSequence", ["x"], ["rows"], axis=1, keepdims=0),    # 4 columns of (6,)
    helper.make_node("ConcatFromSequence", ["rows"], ["stacked"], axis=0, new_axis=1),   # (4, 6): x transposed
  ]
  outs = _run(nodes, [_vi("x", [6, 4]), _vi("y", [1, 4])],
              [_vi("n", [], TensorProto.INT64), _vi("last", None), _vi("cat", None), _vi("stacked", None)], {"x": x, "y": y})
  assert int(outs["n"].numpy()) == 3
  np.testing.assert_array_equal(outs["last"].numpy(), x[2:4])
  np.testing.assert_array_equal(outs["cat"].numpy(), np.concatenate([x[0:2], y, x[2:4]]))
  np.testing.assert_array_equal(outs["stacked"].numpy(), x.T)

@pytest.mark.needs_device
def test_construct_empty_and_bad_position():
  a, b = np.ones((2,), np.float32), np.zeros((2,), np.float32)
  nodes = [_const("p", np.array(0, np.int64)), helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.FLOAT),
           helper.make_node("SequenceInsert", ["e", "a"], ["s1"]), helper.make_node("SequenceConstruct", ["b", "a", "b"], ["s2"]),
           helper.make_node("SequenceAt", ["s1", "p"], ["first"]), helper.make_node("ConcatFromSequence", ["s2"], ["c"], axis=0)]
  outs = _run(nodes, [_vi("a", [2]), _vi("b", [2])], [_vi("first", None), _vi("c", None)], {"a": a, "b": b})
  np.testing.assert_array_equal(outs["first"].numpy(), a)
  np.testing.assert_array_equal(outs["c"].numpy(), np.concatenate([b, a, b]))
  bad = [_const("p", np.array(3, np.int64)), helper.make_node("SequenceConstruct", ["a", "b"], ["s"]),
         helper.make_node("SequenceAt", ["s", "p"], ["o"])]
  with pytest.raises(IndexError, match=r"SequenceAt position 3 out of range \[-2, 1\] for a sequence of 2"):
    _run(bad, [_vi("a", [2]), _vi("b", [2])], [_vi("o", None)], {"a": a, "b": b})
