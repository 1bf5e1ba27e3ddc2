"""The CPU's hand-written quantized matmul (tinycore_cpu/quant_matmul.c) against numpy: every format, every variant
(norm prologue, SwiGLU, residual), several tokens, and each of its three code paths (VNNI or whatever -march=native
gives, AVX2 without VNNI, plain C) built here with the system compiler.

Activations chosen on the int8 grid (one element per block at +-127 times a power of two) quantize exactly, so the
kernel must equal W . x up to float rounding; random activations through the norm are held to the quantization error
bound, computed per output from the weights."""
import ctypes, struct
import numpy as np
import pytest
from _c_library import library_fixture
from tinycore.llm.quant_encode import quantize
from tinycore.nn.gguf import DEQUANT, GGML_TYPES

FORMATS = {"Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24), "Q8_0": (32, 34), "Q2_K": (256, 84), "Q3_K": (256, 110),
           "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210)}
TYPE_ID = {name: t for t, (name, _, _) in GGML_TYPES.items()}
lib = library_fixture("quant_matmul.c")   # x86-64-v3: AVX2 without VNNI; x86-64: the plain C loops

def weights(kind: str, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """(raw blocks (n, bytes per row), the weights they decode to (n, k) float64)."""
  w = np.random.default_rng(seed).standard_normal((n, k)).astype(np.float32) * 0.1
  raw = np.frombuffer(quantize(w, kind), np.uint8).reshape(n, -1)
  deq = DEQUANT[TYPE_ID[kind]](raw.reshape(-1, FORMATS[kind][1])).reshape(n, k).astype(np.float64)
  return raw, deq

def on_grid(t: int, k: int, seed: int) -> np.ndarray:
  """Activations that quantize exactly: integers in [-127, 127] with one +-127 per block of 32, times 2^e per block."""
  rng = np.random.default_rng(seed)
  q = rng.integers(-127, 128, (t, k // 32, 32))
  q[..., 0] = rng.choice([-127, 127], (t, k // 32))
  return (q * 2.0 ** rng.integers(-8, 3, (t, k // 32, 1))).reshape(t, k).astype(np.float32)

def call(lib, kind, x, raw, up=None, g=None, res=None, eps=1e-5, rows=None):
  t, k = x.shape
  n = raw.shape[0]
  name = f"qmm_{kind.lower()}{'_norm' if g is not None else ''}{'_swiglu' if up is not None else ''}{'_res' if res is not None else ''}"
  out = np.full((t, n), np.nan, np.float32)
  ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)
  args = [ptr(out), ptr(np.ascontiguousarray(x)), ptr(raw)] + [ptr(a) for a in (up, g, res) if a is not None]
  start, end = rows or (0, n)
  fn = getattr(lib, name)
  fn.restype = None
  i64 = ctypes.c_int64
  fn(*args, i64(k), i64(t), i64(n), i64(struct.unpack("<I", struct.pack("<f", eps))[0]), i64(start), i64(end))
  return out

@pytest.mark.parametrize("kind", list(FORMATS))
@pytest.mark.parametrize("t", [1, 3, 6], ids=["decode", "few", "tiled"])   # 6: a row unpacked once, 4 tokens + 2 (VNNI)
def test_exact_on_the_int8_grid(lib, kind, t):
  k = 512 if FORMATS[kind][0] == 256 else 96   # 96: an odd number of blocks (three), the tail after the paired loop
  raw, w = weights(kind, 37, k, 1)
  x = on_grid(t, k, 2)
  want = x.astype(np.float64) @ w.T
  got = call(lib, kind, x, raw)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())

@pytest.mark.parametrize("kind", list(FORMATS))
def test_swiglu_and_residual(lib, kind):
  k = 256 if FORMATS[kind][0] == 256 else 64
  raw, w = weights(kind, 20, k, 3)
  raw_up, wu = weights(kind, 20, k, 4)
  x = on_grid(5, k, 5)
  res = np.random.default_rng(6).standard_normal((5, 20)).astype(np.float32)
  g, u = x.astype(np.float64) @ w.T, x.astype(np.float64) @ wu.T
  tol = dict(rtol=1e-5, atol=1e-5 * np.abs(g).max() * max(1.0, np.abs(u).max()))
  np.testing.assert_allclose(call(lib, kind, x, raw, up=raw_up), g / (1 + np.exp(-g)) * u, **tol)
  np.testing.assert_allclose(call(lib, kind, x, raw, res=res), g + res, rtol=1e-5, atol=1e-5 * np.abs(g).max())

def test_row_range_is_all_it_writes(lib):
  raw, w = weights("Q4_0", 16, 64, 7)
  x = on_grid(2, 64, 8)
  got = call(lib, "Q4_0", x, raw, rows=(5, 11))
  assert np.isnan(got[:, :5]).all() and np.isnan(got[:, 11:]).all()
  np.testing.assert_allclose(got[:, 5:11], (x.astype(np.float64) @ w.T)[:, 5:11], rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("kind", list(FORMATS))
def test_norm_within_the_quantization_bound(lib, kind):
  """Random activations, RMS-normed in the kernel: off from the float result by at most what rounding each activation
  to its block's int8 grid can move it (half a step per element, times |w|), plus float noise."""
  k = 512 if FORMATS[kind][0] == 256 else 128
  raw, w = weights(kind, 24, k, 9)
  rng = np.random.default_rng(10)
  x, gw, eps = rng.standard_normal((5, k)).astype(np.float32) * 3, rng.uniform(0.5, 1.5, k).astype(np.float32), 1e-5
  xn = x.astype(np.float64) / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + eps) * gw
  want = xn @ w.T
  step = np.abs(xn).reshape(5, -1, 32).max(-1) / 127                       # (T, blocks): each block's grid step
  bound = (step[:, None, :] / 2 * np.abs(w).reshape(1, 24, -1, 32).sum(-1)).sum(-1)   # (T, N)
  got = call(lib, kind, x, raw, g=gw, eps=eps)
  err = np.abs(got - want)
  assert (err <= bound * 1.01 + 1e-4 * np.abs(want).max()).all(), (err / bound).max()
  assert err.max() > 0   # it did quantize: a float path would be exact here to ~1e-6

def test_nan_activation_gives_nan(lib):
  raw, _ = weights("Q8_0", 4, 64, 11)
  x = on_grid(1, 64, 12)
  x[0, 40] = np.nan
  assert np.isnan(call(lib, "Q8_0", x, raw)).all()

# byte offsets of each format's float16 scales: random bytes there could be inf/NaN, so they get finite values instead
F16_AT = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2],
          "Q6_K": [208]}

def random_blocks(kind: str, n: int, k: int, seed: int) -> np.ndarray:
  """(n, bytes per row) of random bytes, every bit pattern of the quants and scales, with finite float16 scales."""
  rng = np.random.default_rng(seed)
  bs, bb = FORMATS[kind]
  raw = rng.integers(0, 256, (n * k // bs, bb), dtype=np.uint8)
  for o in F16_AT[kind]: raw[:, o:o + 2] = rng.uniform(-0.02, 0.02, len(raw)).astype(np.float16).view(np.uint8).reshape(-1, 2)
  return raw.reshape(n, -1)

def grid_cases():
  """Q2_K and Q3_K over shapes around their block size (K = 256, 512, 768; N = 1, 15, 16, 17; M = 1, 7, 64: the decode
  dot, the panel's token tail and full tiles, a panel's column tail), the other formats on two of them."""
  for kind in FORMATS:
    full = kind in ("Q2_K", "Q3_K")
    for k in (256, 512, 768) if full else (768,):
      for n in (1, 15, 16, 17) if full else (17,):
        for m in (1, 7, 64) if full else (1, 64):
          yield kind, k, n, m

@pytest.mark.parametrize("kind,k,n,m", list(grid_cases()))
def test_matches_gguf_reference(lib, kind, k, n, m):
  """Against the gguf package's reference dequantization times a float64 matmul: exact up to float rounding for
  activations on the int8 grid."""
  gguf = pytest.importorskip("gguf")
  from gguf import quants as gq
  raw = random_blocks(kind, n, k, seed=k + n + m)
  w = np.asarray(gq.dequantize(raw, gguf.GGMLQuantizationType[kind]), np.float64).reshape(n, k)
  assert np.isfinite(w).all()
  x = on_grid(m, k, seed=k * n + m)
  want = x.astype(np.float64) @ w.T
  got = call(lib, kind, x, raw)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())

def test_graph_sees_the_capped_work_of_several_tokens():
  """Each piece of a launch quantizes every token: the CPU graph cuts a several-token launch once per thread, as the
  direct launch does (it cut big ones 4x finer per thread, quantizing the activations 8x over on 2 cores)."""
  from tinycore_cpu.quant_matmul import _Program
  from tinycore_cpu.runtime import DYNAMIC_WORK
  from tinycore.llm.quant_linear import _Runner, _Spec
  r = _Runner(type("P", (), {"work_for_split": staticmethod(_Program.work_for_split)})(), _Spec("q", 1536, ops=1 << 28, mem=0), (576, 32, 1536, 0))
  assert r.graph_launch()[4] < DYNAMIC_WORK
  r1 = _Runner(r.prg, _Spec("q", 1536, ops=1 << 28, mem=0), (576, 1, 1536, 0))   # one token: the work as it is
  assert r1.graph_launch()[4] == 1 << 28
