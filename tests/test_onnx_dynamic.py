"""Dynamic axes bound as symbolic Variables (OnnxRunner(dynamic_axes=...)): one set of kernels serves every size in the
range, plain and under TinyJit, with outputs equal to numpy (hand-built graph) or ONNX Runtime (GPT-2 / MiniLM, slow)."""
import importlib.util
import os
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="tinycore.onnx needs the onnx package (pip install 'tinycore[onnx]')")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from tinycore.onnx import OnnxRunner  # noqa: E402
import tinycore.engine.run as runmod  # noqa: E402

D = 8

def _attention_model():
  """Causal self-attention over a dynamic `seq` axis, with the shape arithmetic exporters emit (Shape -> Gather ->
  Unsqueeze -> Concat -> Reshape / ConstantOfShape), a Trilu mask, a Concat along the dynamic axis and a Range."""
  rng = np.random.default_rng(0)
  w = rng.standard_normal((D, D)).astype(np.float32) / np.sqrt(D)
  c = lambda name, v: helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v), name))
  nodes = [
    c("one", np.array([1], np.int64)), c("d", np.array([D], np.int64)), c("ax0", np.array([0], np.int64)), c("i1", np.array(1, np.int64)),
    c("z", np.array(0, np.int64)), c("step", np.array(1, np.int64)), c("big", np.array(1e4, np.float32)), c("f1", np.array(1.0, np.float32)),
    helper.make_node("Shape", ["x"], ["shp"]),
    helper.make_node("Gather", ["shp", "i1"], ["seq"]),                     # the dynamic size as a 0-d value
    helper.make_node("Unsqueeze", ["seq", "ax0"], ["seq1"]),
    helper.make_node("MatMul", ["x", "w"], ["q"]),
    helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1]),
    helper.make_node("MatMul", ["q", "qt"], ["s"]),
    helper.make_node("Concat", ["seq1", "seq1"], ["sq"], axis=0),
    helper.make_node("ConstantOfShape", ["sq"], ["ones"], value=numpy_helper.from_array(np.array([1.0], np.float32))),
    helper.make_node("Trilu", ["ones"], ["mask"], upper=0),
    helper.make_node("Sub", ["mask", "f1"], ["neg"]),
    helper.make_node("Mul", ["neg", "big"], ["pen"]),
    helper.make_node("Add", ["s", "pen"], ["s2"]),
    helper.make_node("Softmax", ["s2"], ["a"], axis=-1),
    helper.make_node("MatMul", ["a", "q"], ["o"]),
    helper.make_node("Mul", ["seq1", "d"], ["flat"]),
    helper.make_node("Concat", ["one", "flat"], ["oshape"], axis=0),
    helper.make_node("Reshape", ["o", "oshape"], ["y"]),                    # (1, seq*D)
    helper.make_node("Concat", ["x", "x"], ["xx"], axis=1),                # (1, 2*seq, D): a concat along the dynamic axis
    helper.make_node("Range", ["z", "seq", "step"], ["pos"]),             # 0..seq-1
  ]
  x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", D])
  outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None]), helper.make_tensor_value_info("xx", TensorProto.FLOAT, [1, None, D]),
          helper.make_tensor_value_info("pos", TensorProto.INT64, [None])]
  g = helper.make_graph(nodes, "attn", [x], outs, initializer=[numpy_helper.from_array(w, "w")])
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), w

def _reference(x, w):
  q = x @ w
  s = q @ q.transpose(0, 2, 1)
  n = x.shape[1]
  s = s + (np.tril(np.ones((n, n), np.float32)) - 1) * 1e4
  a = np.exp(s - s.max(-1, keepdims=True)); a /= a.sum(-1, keepdims=True)
  return (a @ q).reshape(1, -1), np.concatenate([x, x], 1), np.arange(n)

@pytest.mark.needs_device
@pytest.mark.parametrize("jit", [False, True])
def test_one_kernel_set_for_every_sequence_length(jit):
  m, w = _attention_model()
  run = OnnxRunner(m, dynamic_axes={"seq": 32}, jit=jit)
  rng = np.random.default_rng(1)
  compiled = []
  for n in (5, 9, 2, 17, 32, 1):
    x = rng.standard_normal((1, n, D)).astype(np.float32)
    before = len(runmod._runners)
    out = run({"x": x})
    got = [out[k].numpy() for k in ("y", "xx", "pos")]
    compiled.append(len(runmod._runners) - before)
    for g, want in zip(got, _reference(x, w)):
      assert g.shape == want.shape, (n, g.shape, want.shape)
      np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-5, err_msg=f"seq={n}")
  assert compiled[1:] == [0] * 5, f"kernels compiled per call: {compiled}"   # [0] may reuse an earlier test's kernels
  if jit: assert run._jit.cnt == 6

@pytest.mark.needs_device
def test_dynamic_axis_errors_name_the_axis():
  m, _ = _attention_model()
  with pytest.raises(ValueError, match=r"dynamic_axes \['sequence'\] name no input dim; the model's named dims are \['seq'\]"):
    OnnxRunner(m, dynamic_axes={"sequence": 8})
  with pytest.raises(ValueError, match="largest size must be a positive int"):
    OnnxRunner(m, dynamic_axes={"seq": 0})
  run = OnnxRunner(m, dynamic_axes={"seq": 8})
  with pytest.raises(ValueError, match=r"input 'x' axis 1 \(seq\) has size 9, outside the dynamic range 1..8"):
    run({"x": np.zeros((1, 9, D), np.float32)})

# ---- real models vs ONNX Runtime (slow: exports with torch, compiles a transformer)

def _models():
  spec = importlib.util.spec_from_file_location("onnx_models", os.path.join(os.path.dirname(__file__), "..", "bench", "onnx_models.py"))
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod

def _check_sizes(path, run, feeds_for, sizes):
  ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is the reference (pip install 'tinycore[onnx]')")
  sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
  compiled = []
  for n in sizes:
    feeds = feeds_for(n)
    want = sess.run(None, feeds)
    before = len(runmod._runners)
    got = [v.numpy() for v in run(feeds).values()]
    compiled.append(len(runmod._runners) - before)
    for g, w in zip(got, want):
      assert g.shape == w.shape and g.dtype == w.dtype, (n, g.shape, w.shape)
      assert float(np.abs(g.astype(np.float64) - w).max()) < 1e-4, f"size {n}"
  assert compiled[0] > 0 and compiled[1:] == [0] * (len(sizes) - 1), f"kernels compiled per call: {compiled}"

@pytest.mark.needs_device
@pytest.mark.slow
def test_gpt2_kv_cache_over_past_lengths(tmp_path):
  pytest.importorskip("torch"); pytest.importorskip("transformers")
  path, feeds = _models().gpt2_kv(str(tmp_path))
  run = OnnxRunner(path, dynamic_axes={"past": 64}, jit=True)
  rng = np.random.default_rng(1)
  def feeds_for(past):
    kv = lambda: rng.standard_normal((2, 1, 4, past, 16)).astype(np.float32)
    return {"input_ids": feeds["input_ids"], "past_k": kv(), "past_v": kv()}
  _check_sizes(path, run, feeds_for, [8, 3, 9, 17, 64])

@pytest.mark.needs_device
@pytest.mark.slow
def test_minilm_over_sequence_lengths(tmp_path):
  pytest.importorskip("torch"); pytest.importorskip("transformers")
  try: path, _ = _models().minilm(str(tmp_path), dynamic=True)
  except ImportError as e: pytest.skip(f"minilm needs {e.name or e}")
  run = OnnxRunner(path, dynamic_axes={"seq": 64})
  rng = np.random.default_rng(1)
  def feeds_for(n):
    mask = np.ones((2, n), np.int64); mask[1, n // 2:] = 0
    return {"input_ids": rng.integers(100, 20000, (2, n)).astype(np.int64), "attention_mask": mask}
  _check_sizes(path, run, feeds_for, [32, 7, 20, 64])
