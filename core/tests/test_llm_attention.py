"""llm/attention.py: one decode step's cache write and attention by the device's own kernel (the CPU's
attention_decode.c), against numpy: both rotary layouts, a partial rotary dim, grouped heads, and under TinyJit, where
each replay must pass its own position (the fast replay and the CPU graph both)."""
import math
import numpy as np, pytest
from tinycore import Tensor, TinyJit
from tinycore.device import Device
from tinycore.uop import Variable
from tinycore.llm.attention import decode_attention

pytestmark = pytest.mark.needs_device

@pytest.fixture
def kernel():
  """Skip unless the default device has the kernel (asked at run time: collection must not open a device)."""
  if getattr(Device[Device.DEFAULT].renderer, "attention_decode", None) is None:
    pytest.skip("the default device has no attention_decode kernel")

def _rotate(x: np.ndarray, cs: np.ndarray, sn: np.ndarray, rd: int, neox: bool) -> np.ndarray:
  x, h = x.astype(np.float64).copy(), rd // 2
  a, b = (np.arange(h), np.arange(h) + h) if neox else (np.arange(h) * 2, np.arange(h) * 2 + 1)
  xa, xb = x[..., a].copy(), x[..., b].copy()
  x[..., a], x[..., b] = xa * cs - xb * sn, xa * sn + xb * cs
  return x

def _reference(qkv, cache, cs, sn, pos, nh, nkv, hd, rd, neox, scale):
  """(attention output, cache after the write) in float64."""
  q = _rotate(qkv[:nh * hd].reshape(nh, hd), cs, sn, rd, neox)
  k = _rotate(qkv[nh * hd:(nh + nkv) * hd].reshape(nkv, hd), cs, sn, rd, neox)
  v = qkv[(nh + nkv) * hd:].reshape(nkv, hd)
  c = cache.astype(np.float64).copy()
  c[0, 0, :, pos], c[1, 0, :, pos] = k, v
  out = np.empty((nh, hd))
  for h in range(nh):
    g = h // (nh // nkv)
    s = c[0, 0, g, :pos + 1] @ q[h] * scale
    p = np.exp(s - s.max()); p /= p.sum()
    out[h] = p @ c[1, 0, g, :pos + 1]
  return out.reshape(-1), c

@pytest.mark.usefixtures("kernel")
@pytest.mark.parametrize("nh,nkv,hd,rd,neox", [(9, 3, 64, 64, False), (4, 4, 32, 32, True), (6, 2, 48, 16, False), (8, 2, 40, 24, True)])
def test_matches_numpy(nh, nkv, hd, rd, neox):
  rng = np.random.default_rng(nh * hd + rd)
  M, scale = 24, 1 / math.sqrt(hd)
  cache_np = rng.standard_normal((2, 1, nkv, M, hd)).astype(np.float32)
  cache = Tensor(cache_np).realize()
  v = Variable("pos", 0, M - 1)
  for pos in (0, 7, M - 1):
    qkv_np = rng.standard_normal((nh + 2 * nkv) * hd).astype(np.float32)
    ang = rng.uniform(-3, 3, rd // 2)
    cs, sn = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    out = decode_attention(Tensor(qkv_np.reshape(1, 1, -1)), cache, Tensor(cs.reshape(1, -1)), Tensor(sn.reshape(1, -1)), v.bind(pos),
                           n_heads=nh, n_kv_heads=nkv, head_dim=hd, rope_dim=rd, neox=neox, scale=scale)
    ref, cache_np = _reference(qkv_np, cache_np, cs, sn, pos, nh, nkv, hd, rd, neox, scale)
    np.testing.assert_allclose(out.numpy().reshape(-1), ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(cache.numpy(), cache_np, rtol=2e-6, atol=2e-6)   # the row at pos written, the rest untouched

@pytest.mark.usefixtures("kernel")
@pytest.mark.parametrize("graph", [True, False])
def test_replays_pass_their_position(graph):
  nh, nkv, hd, M = 4, 2, 32, 16
  rng = np.random.default_rng(3)
  cache_np = np.zeros((2, 1, nkv, M, hd), np.float32)
  cache = Tensor(cache_np).realize()
  cs, sn = Tensor(np.ones((1, hd // 2), np.float32)).realize(), Tensor(np.zeros((1, hd // 2), np.float32)).realize()
  f = TinyJit(lambda qkv, pos: decode_attention(qkv, cache, cs, sn, pos, n_heads=nh, n_kv_heads=nkv, head_dim=hd, rope_dim=hd,
                                                neox=False, scale=0.25) * 1)
  v = Variable("pos", 0, M - 1)
  from tinycore.helpers import Context
  with Context(JIT=1 if graph else 2):   # JIT=2: no device graph, the kernels replay one by one
    for pos in range(8):
      qkv_np = rng.standard_normal((nh + 2 * nkv) * hd).astype(np.float32)
      out = f(Tensor(qkv_np.reshape(1, 1, -1)).realize(), v.bind(pos)).numpy().reshape(-1)
      ref, cache_np = _reference(qkv_np, cache_np, np.ones(hd // 2), np.zeros(hd // 2), pos, nh, nkv, hd, hd, False, 0.25)
      np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
  np.testing.assert_allclose(cache.numpy(), cache_np, rtol=1e-6, atol=1e-6)

@pytest.mark.usefixtures("kernel")
def test_position_range_outside_the_cache_is_refused():
  cache = Tensor.zeros(2, 1, 2, 8, 32).contiguous().realize()
  qkv, cs = Tensor.zeros(1, 1, 4 * 32 + 2 * 2 * 32).contiguous().realize(), Tensor.ones(1, 16).contiguous().realize()
  with pytest.raises(ValueError, match="outside the 8-row cache"):
    decode_attention(qkv, cache, cs, cs, Variable("pos", 0, 8).bind(3), n_heads=4, n_kv_heads=2, head_dim=32, rope_dim=32, neox=False, scale=1.0)
  np.testing.assert_array_equal(cache.numpy(), 0)   # nothing written

def test_other_shapes_fall_back():
  """Not a whole realized cache of the expected layout: None, nothing run (the caller builds the generated kernels)."""
  cache = Tensor.zeros(2, 1, 2, 8, 32)   # lazy
  qkv, cs = Tensor.zeros(1, 1, 4 * 32 + 2 * 2 * 32).contiguous().realize(), Tensor.ones(1, 16).contiguous().realize()
  assert decode_attention(qkv, cache, cs, cs, Variable("pos", 0, 7).bind(3), n_heads=4, n_kv_heads=2, head_dim=32, rope_dim=32,
                          neox=False, scale=1.0) is None
