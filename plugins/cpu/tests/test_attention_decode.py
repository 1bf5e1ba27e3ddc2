"""The CPU's hand-written decode attention (tinycore_cpu/attention_decode.c) against numpy, built here for each of its
code paths (AVX2 where -march=native or x86-64-v3 has it, plain C with x86-64) with warnings as errors: the cache row
written at pos and nothing else, each query head's attention over rows 0..pos, and a position outside the cache
giving NaN without a write."""
import ctypes, struct
import numpy as np
import pytest
from _c_library import library_fixture

lib = library_fixture("attention_decode.c")

def _call(lib, out, qkv, cache, cs, sn, nh, nkv, hd, rd, M, neox, scale, pos, start, end):
  P = lambda a: a.ctypes.data_as(ctypes.c_void_p)
  bits = struct.unpack("<I", struct.pack("<f", scale))[0]
  lib.attn_decode(P(out), P(qkv), P(cache), P(cs), P(sn), *[ctypes.c_int64(v) for v in (nh, nkv, hd, rd, M, neox, bits, pos, start, end)])

def _reference(qkv, cache, cs, sn, pos, nh, nkv, hd, rd, neox, scale):
  def rot(x):
    x, h = x.astype(np.float64).copy(), rd // 2
    a, b = (np.arange(h), np.arange(h) + h) if neox else (2 * np.arange(h), 2 * np.arange(h) + 1)
    xa, xb = x[..., a].copy(), x[..., b].copy()
    x[..., a], x[..., b] = xa * cs - xb * sn, xa * sn + xb * cs
    return x
  q, k = rot(qkv[:nh * hd].reshape(nh, hd)), rot(qkv[nh * hd:(nh + nkv) * hd].reshape(nkv, hd))
  c = cache.astype(np.float64).copy()
  c[0, :, pos], c[1, :, pos] = k, qkv[(nh + nkv) * hd:].reshape(nkv, hd)
  out = np.empty((nh, hd))
  for h in range(nh):
    g = h // (nh // nkv)
    s = c[0, g, :pos + 1] @ q[h] * scale
    p = np.exp(s - s.max())
    out[h] = p @ c[1, g, :pos + 1] / p.sum()
  return out.reshape(-1), c

@pytest.mark.parametrize("nh,nkv,hd,rd,neox", [(9, 3, 64, 64, 0), (4, 4, 36, 36, 1), (6, 2, 72, 40, 0)])
def test_matches_numpy(lib, nh, nkv, hd, rd, neox):
  rng = np.random.default_rng(hd)
  M = 20
  for pos in (0, 5, M - 1):
    qkv = rng.standard_normal((nh + 2 * nkv) * hd).astype(np.float32)
    cache = rng.standard_normal((2, nkv, M, hd)).astype(np.float32)
    ang = rng.uniform(-3, 3, rd // 2)
    cs, sn = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    ref, ref_cache = _reference(qkv, cache, cs, sn, pos, nh, nkv, hd, rd, neox, hd ** -0.5)
    out = np.full(nh * hd, 7.0, np.float32)
    for g in range(nkv): _call(lib, out, qkv, cache, cs, sn, nh, nkv, hd, rd, M, neox, hd ** -0.5, pos, g, g + 1)   # one piece per kv head
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cache, ref_cache, rtol=1e-6, atol=1e-6)

def test_position_outside_the_cache_gives_nan_and_writes_nothing(lib):
  nh, nkv, hd, M = 2, 1, 32, 8
  qkv, cache = np.ones((nh + 2 * nkv) * hd, np.float32), np.zeros((2, nkv, M, hd), np.float32)
  cs, sn = np.ones(hd // 2, np.float32), np.zeros(hd // 2, np.float32)
  for pos in (-1, M, 1 << 40):
    out = np.zeros(nh * hd, np.float32)
    _call(lib, out, qkv, cache, cs, sn, nh, nkv, hd, hd, M, 0, 1.0, pos, 0, nkv)
    assert np.isnan(out).all()
    assert not cache.any()
