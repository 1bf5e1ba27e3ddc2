"""GGUF block formats kept quantized: the tensor-op decoders (llm/quant_blocks.py) against the `gguf` package's reference
dequantizers, the fused quantized matmul (decode matvec and prefill matmul) against a float matmul, the quantizers
(llm/quant_encode.py), and a tiny model in every format run end to end with its weights still in block form."""
import numpy as np
import pytest
from tinycore import Tensor, dtypes
from tinycore.helpers import GlobalCounters
from tinycore.llm.quant_blocks import BLOCK_FORMATS, dequantize
from tinycore.llm.quant_encode import quantize
from tinycore.nn.file_errors import UnsupportedFileError
from tinycore.uop import Ops

pytestmark = pytest.mark.needs_device
gguf = pytest.importorskip("gguf")
from gguf import quants as gq

KINDS = list(BLOCK_FORMATS)
# byte offsets of each format's float16 scales: random bytes there could be inf/NaN, so they get sane values instead
F16_AT = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2],
          "Q6_K": [208]}

def random_blocks(kind: str, rows: int, cols: int, seed: int = 0) -> np.ndarray:
  """(rows, bytes per row): quantized with gguf's reference quantizer where it has one, else random bytes with finite
  scales small enough that the weights look like a model's (|w| mostly < 1)."""
  rng = np.random.default_rng(seed)
  bs, bb = BLOCK_FORMATS[kind]
  try: return np.asarray(gq.quantize(rng.standard_normal((rows, cols)).astype(np.float32), gguf.GGMLQuantizationType[kind]), np.uint8)
  except NotImplementedError: pass
  raw = rng.integers(0, 256, (rows * cols // bs, bb), dtype=np.uint8)
  for o in F16_AT[kind]: raw[:, o:o + 2] = rng.uniform(-0.02, 0.02, len(raw)).astype(np.float16).view(np.uint8).reshape(-1, 2)
  return raw.reshape(rows, -1)

def reference(raw: np.ndarray, kind: str) -> np.ndarray: return np.asarray(gq.dequantize(raw, gguf.GGMLQuantizationType[kind]), np.float32)

@pytest.mark.parametrize("kind", KINDS)
def test_decode_matches_gguf_reference(kind):
  bs = BLOCK_FORMATS[kind][0]
  raw = random_blocks(kind, 5, 3 * bs, seed=1)
  got = dequantize(Tensor(raw), kind, (5, 3 * bs)).numpy()
  np.testing.assert_array_equal(got, reference(raw, kind))   # same float32 operations in the same order: bit-exact

@pytest.mark.parametrize("kind", KINDS)
def test_host_decode_matches_gguf_reference(kind):
  """nn.gguf's numpy decoders (gguf_load's float32 path and the embedding rows) agree with the reference too."""
  from tinycore.nn.gguf import DEQUANT, GGML_TYPES
  tid = next(t for t, (n, _, _) in GGML_TYPES.items() if n == kind)
  bs, bb = BLOCK_FORMATS[kind]
  raw = random_blocks(kind, 4, 2 * bs, seed=6)
  np.testing.assert_array_equal(DEQUANT[tid](raw.reshape(-1, bb)).reshape(4, -1), reference(raw, kind))

@pytest.mark.parametrize("kind", KINDS)
def test_decode_extreme_bytes(kind):
  """All-zero and all-0xFF payloads (scales kept finite): the edges of every bit field."""
  bs, bb = BLOCK_FORMATS[kind]
  for fill in (0x00, 0xFF, 0x55, 0xAA):
    raw = np.full((2, bb), fill, np.uint8)
    for o in F16_AT[kind]: raw[:, o:o + 2] = np.array([0.5, -0.25], np.float16).view(np.uint8).reshape(2, 2)
    np.testing.assert_array_equal(dequantize(Tensor(raw.reshape(1, -1)), kind, (1, 2 * bs)).numpy(), reference(raw.reshape(1, -1), kind))

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("T", [1, 5, 32], ids=["decode", "prefill", "prefill_chunk"])
def test_fused_matmul_matches_float(kind, T):
  """x @ W.T with W decoded inside the matmul: one kernel, no float32 weight buffer, same result as a float matmul."""
  bs = BLOCK_FORMATS[kind][0]
  O, I = 24, 2 * bs
  raw = random_blocks(kind, O, I, seed=2)
  w = Tensor(raw).realize()
  x = np.random.default_rng(3).standard_normal((T, I)).astype(np.float32)
  xt = Tensor(x).realize()
  # a first call makes the constants a format decodes with on first use (Q5's bit masks), whatever test ran before
  xt.matmul(dequantize(w, kind, (O, I)).T).realize()
  GlobalCounters.reset()
  before = GlobalCounters.mem_used
  y = xt.matmul(dequantize(w, kind, (O, I)).T).realize()
  assert GlobalCounters.kernel_count == 1, f"the decode was not fused into the matmul ({GlobalCounters.kernel_count} kernels)"
  # the output only: never a float copy of the weight (O*I*4 bytes)
  assert GlobalCounters.mem_used - before <= T * O * 4, "a buffer besides the output was allocated (a float copy of the weight?)"
  want = x.astype(np.float64) @ reference(raw, kind).astype(np.float64).T
  np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())

def test_decode_checks_its_input():
  with pytest.raises(ValueError, match="needs 36 bytes"): dequantize(Tensor(np.zeros(35, np.uint8)), "Q4_0", (2, 32))
  with pytest.raises(ValueError, match="multiple of 256"): dequantize(Tensor(np.zeros(110, np.uint8)), "Q3_K", (1, 128))
  with pytest.raises(TypeError, match="uint8"): dequantize(Tensor(np.zeros(18, np.int8)), "Q4_0", (1, 32))
  with pytest.raises(ValueError, match="IQ2_XXS"): dequantize(Tensor(np.zeros(66, np.uint8)), "IQ2_XXS", (1, 256))

@pytest.mark.parametrize("kind", KINDS)
def test_quantizer_roundtrip(kind):
  """Our quantizer's bytes decode (by gguf's reference) to values near the input: within half a quantization step."""
  x = np.random.default_rng(4).standard_normal((3, 512)).astype(np.float32)
  raw = np.frombuffer(quantize(x, kind), np.uint8).reshape(3, -1)
  y = reference(raw, kind)
  rms = np.sqrt(((y - x) ** 2).mean())
  # rms error of round-to-nearest with b bits over a block's range, with room for the coarse 6-bit K-quant scales
  bits = {"Q4_0": 4, "Q4_1": 4, "Q5_0": 5, "Q5_1": 5, "Q8_0": 8, "Q2_K": 2, "Q3_K": 3, "Q4_K": 4, "Q5_K": 5, "Q6_K": 6}[kind]
  assert rms < 2.5 * 6 / 2 ** bits / np.sqrt(12) * 2, f"{kind}: rms error {rms}"
  if kind in ("Q4_0", "Q8_0", "Q5_0"):   # the symmetric formats round as ggml's reference quantizer does (ties may differ)
    assert (raw == np.asarray(gq.quantize(x, gguf.GGMLQuantizationType[kind]))).mean() > 0.99

def test_iq_formats_are_a_clear_error(tmp_path):
  from tinycore.nn.gguf import gguf_load
  w = gguf.GGUFWriter(str(tmp_path / "iq.gguf"), "llama")
  w.add_tensor("blk.0.attn_q.weight", np.zeros((1, 66), np.uint8), raw_dtype=gguf.GGMLQuantizationType.IQ2_XXS)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
  with pytest.raises(UnsupportedFileError, match=r"'blk.0.attn_q.weight' is IQ2_XXS \(ggml type 16\).*Q4_K"): gguf_load(tmp_path / "iq.gguf")

# ---- a tiny llama in every format, run with its weights still quantized
@pytest.mark.parametrize("kind", KINDS)
def test_model_runs_quantized(kind, tmp_path):
  from tinycore.llm.generate import LLM
  from tinycore.llm.testmodel import tiny_llama
  from tinycore.nn.gguf import GGML_TYPES, gguf_tensors
  bs = BLOCK_FORMATS[kind][0]
  p = str(tmp_path / f"{kind}.gguf")
  tiny_llama(p, dim=bs, hidden=bs, n_heads=4, n_kv_heads=2, qtype=kind, seed=5)
  before = GlobalCounters.mem_used
  llm = LLM(p, max_context=16, chunk=4, int8_activations=False)   # float activations: compared with a float reference
  # device memory after loading: the block bytes of the matmul weights, float32 norms and the KV cache, nothing more (a
  # float copy of any quantized weight would be ~4x its bytes)
  w2 = sum(w.nbytes for n, w in llm.model.w.items() if len(w.shape) == 2 and n != "token_embd.weight")
  small = sum(w.nbytes for w in llm.model.w.values() if len(w.shape) == 1) + sum(c.nbytes() for c in llm.model.cache)
  assert GlobalCounters.mem_used - before <= w2 + small + 4096, (GlobalCounters.mem_used - before, w2, small)
  # every matmul weight is the file's block bytes, on the device as uint8; q/k/v stacked into one buffer (one copy)
  qkv = llm.model.w["blk.0.attn_qkv.weight"]
  assert qkv.kind == kind and qkv.parts["raw"].dtype == dtypes.uint8 and qkv.parts["raw"].uop.base.op is Ops.BUFFER
  mats = [w for n, w in llm.model.w.items() if n.endswith(".weight") and len(w.shape) == 2 and n != "token_embd.weight"]
  assert all(w.parts["raw"].dtype == dtypes.uint8 for w in mats)
  assert "raw" not in (llm.model.w["token_embd.weight"]._parts or {}), "the (untied) embedding table was copied to the device"
  # logits against a numpy forward pass over gguf's reference decode of the same bytes
  from test_llm import ref_forward
  _, infos, _keep = gguf_tensors(p)
  class W:
    def __init__(self, a): self.a = a
    def numpy(self): return self.a
  ws = {}
  for name, shape, tt, raw in infos:
    t = GGML_TYPES[tt][0]
    a = np.frombuffer(raw, np.uint8)
    ws[name] = W(np.frombuffer(raw, np.float32).reshape(shape) if t == "F32" else reference(a.reshape(shape[0], -1), t).reshape(shape))
  toks = llm.tok.encode("hello world")
  want = ref_forward(llm.kv, ws, toks)
  np.testing.assert_allclose(llm.forward_all(toks), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
  # cached decode after a prefill agrees with the full pass
  last = llm.prefill(toks[:-1])
  np.testing.assert_allclose(last, want[len(toks) - 2], rtol=1e-3, atol=1e-3 * np.abs(want).max())
  np.testing.assert_allclose(llm.decode(toks[-1], len(toks) - 1), want[-1], rtol=1e-3, atol=1e-3 * np.abs(want).max())
