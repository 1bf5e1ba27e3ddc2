"""The LLM with int8 activations (llm/quant_linear.py: a device's hand-written quantized matmul, where it has one)
against the same model with float activations: logits within the quantization error, the prefill/decode path
consistent with the full pass, and the kernels actually used (a decode step is four launches per layer for its
matmuls plus the attention, not the generated norm and dequant kernels)."""
import numpy as np, pytest
from tinycore.device import Device
from tinycore.llm.generate import LLM
from tinycore.llm.testmodel import tiny_llama
from tinycore.helpers import GlobalCounters

pytestmark = pytest.mark.needs_device

def _has_kernels() -> bool: return getattr(Device[Device.DEFAULT].renderer, "quant_matmul", None) is not None

@pytest.fixture(scope="module", params=["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"])
def pair(request, tmp_path_factory):
  if not _has_kernels(): pytest.skip(f"{Device.DEFAULT} has no quant_matmul kernels")
  kind = request.param
  dim = 256 if kind.endswith("_K") else 64
  p = str(tmp_path_factory.mktemp("int8") / f"{kind}.gguf")
  tiny_llama(p, dim=dim, hidden=2 * dim, n_heads=4, n_kv_heads=2, qtype=kind, seed=3, tied=True, vocab_kind="gpt2")
  return kind, LLM(p, max_context=32, chunk=8, int8_activations=True), LLM(p, max_context=32, chunk=8, int8_activations=False)

def close(a: np.ndarray, b: np.ndarray):
  """int8 activations move logits by about 1% of their scale; a wrong block, scale or row is off by 100%"""
  cos = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
  assert cos.min() > 0.999, cos.min()
  assert np.abs(a - b).max() <= 0.05 * np.abs(b).max(), (np.abs(a - b).max(), np.abs(b).max())

def test_logits_close_to_float_activations(pair):
  _, fast, exact = pair
  toks = fast.tok.encode("hello world, the tree is lit")
  a, b = fast.forward_all(toks), exact.forward_all(toks)
  close(a, b)
  assert np.abs(a - b).max() > 0   # the int8 path did run: float activations would agree to ~1e-6

def test_prefill_and_decode_match_full_pass(pair):
  _, fast, _ = pair
  toks = fast.tok.encode("hello world, the tree is lit")
  full = fast.forward_all(toks)
  close(fast.prefill(toks[:11])[None], full[10][None])
  for j in range(11, len(toks)): close(fast.decode(toks[j], j)[None], full[j][None])

def test_decode_step_launches_few_kernels(pair):
  _, fast, _ = pair
  toks = fast.tok.encode("the world")
  list(fast.generate(toks, 4))   # runs, captures and replays the decode step
  n = fast.cfg.n_layers
  before = GlobalCounters.kernel_count
  fast.decode(toks[0], len(toks) + 4)
  step = GlobalCounters.kernel_count - before
  # per layer: 4 matmuls (norms, SwiGLU and residual adds folded in), 1 rope + KV-cache write, 5 attention (scores, max,
  # sum, probabilities, weighted values); per step: the position, cos and sin, the head and the token's embedding row.
  # Before: 14 per layer
  assert step <= 10 * n + 5, step

def test_quant_linear_checks_its_inputs():
  """Shapes and sizes are checked against the buffers before the kernel walks them (it trusts what it is given)."""
  if not _has_kernels(): pytest.skip(f"{Device.DEFAULT} has no quant_matmul kernels")
  from tinycore.tensor import Tensor
  from tinycore.llm.weights import QWeight
  from tinycore.llm.quant_linear import quant_linear
  w = QWeight("Q4_0", (8, 64), {"raw": Tensor(np.zeros((8, 36), np.uint8))}, 8 * 36).realize()
  x = Tensor(np.ones((1, 2, 64), np.float32)).realize()
  assert quant_linear(x, w).shape == (1, 2, 8)
  with pytest.raises(ValueError, match="inner size 64"): quant_linear(Tensor(np.ones((1, 1, 32), np.float32)), w)
  short = QWeight("Q4_0", (8, 64), {"raw": Tensor(np.zeros((8, 30), np.uint8))}, 8 * 36)
  with pytest.raises(ValueError, match="has 240 bytes, expected 288"): quant_linear(x, short)
  with pytest.raises(ValueError, match="residual of shape"): quant_linear(x, w, res=Tensor(np.ones((1, 2, 7), np.float32)))
  with pytest.raises(ValueError, match="norm weight of shape"): quant_linear(x, w, norm=Tensor(np.ones(63, np.float32)))
  from tinycore.dtype import dtypes
  assert quant_linear(x.cast(dtypes.float16), w) is None   # float32 activations only: anything else takes the generated kernels
