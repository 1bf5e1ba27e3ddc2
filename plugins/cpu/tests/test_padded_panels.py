"""Matmuls whose right operand isn't whole panels (N not a multiple of the tile's 32 columns): the CPU packs it with
the last panel padded by zero columns (CRenderer.matmul_padded_panels), computes over whole panels and drops the extra
columns (Tensor.dot). Values against numpy in float64 around the panel width, transposed and batched operands, the
gradients, and the policy's limits."""
import numpy as np
import pytest
from tinycore import Tensor, Device
pytestmark = pytest.mark.needs_device

def _rng(*shape, seed=0): return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)

def _width(M: int, K: int, N: int, transposed: bool = False) -> int:
  """The columns of the right operand as the matmul computes them (N, or N rounded up to a panel)."""
  w = Tensor(_rng(N, K)).T if transposed else Tensor(_rng(K, N))
  return w._panels(Tensor(_rng(M, K))).shape[-1]

def _check(out: Tensor, ref: np.ndarray, K: int):
  got = out.numpy()
  assert got.shape == ref.shape
  # float32 sums of K products of unit normals: error ~ sqrt(K) ulps of the magnitude (~sqrt(K))
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=2e-5 * K)

@pytest.mark.parametrize("M,K,N", [(256, 256, 300), (200, 512, 520), (256, 256, 1000), (97, 1024, 543), (300, 300, 1009),
                                   (255, 255, 255), (257, 257, 257), (100, 128, 99), (512, 33, 1023)])
def test_ragged_columns_are_padded_and_dropped(M, K, N):
  if not Device["CPU"].renderer.matmul_padded_panels(M, K, N, False): pytest.skip("this CPU's tile has no padded panels")
  assert _width(M, K, N) == -(-N // 32) * 32 and _width(M, K, N) != N
  a, b = _rng(M, K), _rng(K, N, seed=1)
  _check(Tensor(a) @ Tensor(b), a.astype(np.float64) @ b, K)

@pytest.mark.parametrize("M,K,N", [(256, 512, 1000), (512, 256, 530), (384, 768, 2017), (255, 255, 255), (64, 100, 257)])
def test_transposed_ragged_columns(M, K, N):
  if not Device["CPU"].renderer.matmul_padded_panels(M, K, N, True): pytest.skip("this CPU's tile has no padded panels")
  assert _width(M, K, N, transposed=True) % 32 == 0
  a, w = _rng(M, K), _rng(N, K, seed=2)
  _check(Tensor(a) @ Tensor(w).T, a.astype(np.float64) @ w.T.astype(np.float64), K)

def test_batched_right_operands():
  a, b = _rng(2, 256, 256), _rng(2, 256, 1000, seed=3)
  _check(Tensor(a) @ Tensor(b), a.astype(np.float64) @ b, 256)

def test_epilogue_and_later_ops_see_only_the_real_columns():
  a, b, bias = _rng(256, 256), _rng(256, 300, seed=4), _rng(300, seed=5)
  out = (Tensor(a) @ Tensor(b) + Tensor(bias)).relu().sum(axis=1)
  ref = np.maximum(a.astype(np.float64) @ b + bias, 0).sum(axis=1)
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-2)

def test_gradients_through_a_padded_product():
  a, b, g = _rng(256, 256), _rng(256, 1000, seed=6), _rng(256, 1000, seed=7)
  x, w = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
  ((x @ w) * Tensor(g)).sum().backward()
  a64, b64, g64 = a.astype(np.float64), b.astype(np.float64), g.astype(np.float64)
  np.testing.assert_allclose(x.grad.numpy(), g64 @ b64.T, rtol=1e-4, atol=2e-5 * 1000)
  np.testing.assert_allclose(w.grad.numpy(), a64.T @ g64, rtol=1e-4, atol=2e-5 * 256)

def test_nan_and_inf_stay_in_their_columns():
  # the zero pad columns meet inf/NaN rows of a: 0 * inf = NaN lands only in the dropped columns
  a, b = _rng(256, 256), _rng(256, 300, seed=8)
  a[3, 7], a[10, 0] = np.inf, np.nan
  with np.errstate(invalid="ignore"): ref = a.astype(np.float64) @ b
  got = (Tensor(a) @ Tensor(b)).numpy()
  np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
  finite = np.isfinite(ref)
  np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-4, atol=2e-5 * 256)

def test_policy_limits():
  r = Device["CPU"].renderer
  if not r.tiling.panel_width(256): pytest.skip("no panels on this CPU")
  assert not r.matmul_padded_panels(64, 64, 200, False)       # too small to pay for two extra kernels
  assert not r.matmul_padded_panels(40, 40, 41, False)        # the same where the unpadded kernel is scalar
  assert r.matmul_padded_panels(255, 255, 255, False) == r.matmul_padded_panels(64, 100, 257, True) == 32   # it is, and
  assert r.matmul_padded_panels(100, 128, 99, False) == 32   # a big pad beats one scalar accumulator per output
  assert not r.matmul_padded_panels(1, 4096, 4001, False)     # a decode matvec never copies its weight
  assert not r.matmul_padded_panels(512, 512, 136, False)     # a pad of 24 columns on 136 (18%) where 8-wide vectors divide it
  assert not r.matmul_padded_panels(512, 512, 1024, False)    # whole panels: matmul_panels' business, no pad
  assert not r.matmul_padded_panels(128, 512, 1000, True)     # a transposed operand under 192 rows: the gather is as fast
  assert r.matmul_padded_panels(1000, 1000, 1000, False) == r.matmul_padded_panels(1000, 1000, 1000, True) == 32
