"""Real graphs exported by torch.onnx.export (bench/onnx_models.py) run by tinycore.onnx and compared with ONNX Runtime.
The tiny CNN runs by default; resnet18, mobilenet_v3_small, a small ViT, MiniLM and the GPT-2 KV-cache step are slow."""
import importlib.util
import os
import numpy as np
import pytest

pytest.importorskip("onnx", reason="tinycore.onnx needs the onnx package (pip install 'tinycore[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="ONNX Runtime is the reference (pip install 'tinycore[onnx]')")
pytest.importorskip("torch", reason="the models are built with torch.onnx.export (torch==2.13.0)")

_spec = importlib.util.spec_from_file_location("onnx_models", os.path.join(os.path.dirname(__file__), "..", "bench", "onnx_models.py"))
onnx_models = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(onnx_models)

# max abs diff allowed per model (float32 through tens of layers; MiniLM's outputs are O(1)) and the cosine floor
TOL = {"tiny_cnn": 1e-4, "resnet18": 1e-3, "mobilenet_v3_small": 1e-3, "vit_small": 1e-4, "minilm": 1e-4, "gpt2_kv": 1e-4}

def _compare(name, tmp_path):
  from tinycore.onnx import OnnxRunner
  try: path, feeds = onnx_models.MODELS[name](str(tmp_path))
  except ImportError as e: pytest.skip(f"{name} needs {e.name or e}")
  want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
  got = [v.numpy() for v in OnnxRunner(path)(feeds).values()]
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert g.shape == w.shape and g.dtype == w.dtype
    diff = float(np.abs(g.astype(np.float64) - w).max())
    cos = float((g.ravel() @ w.ravel()) / (np.linalg.norm(g) * np.linalg.norm(w)))
    assert diff < TOL[name] and cos > 0.99999, f"{name}: max abs diff {diff:.3g}, cosine {cos:.7f}"

@pytest.mark.needs_device
def test_tiny_cnn(tmp_path): _compare("tiny_cnn", tmp_path)

@pytest.mark.needs_device
@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "vit_small", "minilm", "gpt2_kv"])
def test_model(name, tmp_path): _compare(name, tmp_path)
