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
  assert r.matmul_padded_panels(512, 512, 136, False) == 32   # 8-wide vectors divide 136: half the FMA width (1.3-1.6x padded)
  assert r.matmul_padded_panels(1000, 1000, 36, False) == 32  # 4-lane scalar unrolls: 10x padded
  assert not r.matmul_padded_panels(512, 512, 1024, False)    # whole panels: matmul_panels' business, no pad
  assert r.matmul_padded_panels(128, 512, 1000, True) == 32   # no whole vector divides 1000: padded even transposed (1.7x)
  assert not r.matmul_padded_panels(128, 512, 1008, True)     # 16 lanes divide 1008: under 192 rows the gather is as fast
  assert r.matmul_padded_panels(1000, 1000, 1000, False) == r.matmul_padded_panels(1000, 1000, 1000, True) == 32

def _matmul_kernel_src(out: Tensor) -> str:
  from tinycore.codegen import get_program
  from tinycore.uop import Ops
  ast = next(si.ast for si in out.schedule() if not si.is_copy and any(u.op is Ops.REDUCE_AXIS for u in si.ast.toposort()))
  return get_program(ast, Device["CPU"].renderer).src

@pytest.mark.parametrize("M,K,N", [(128, 128, 65), (256, 128, 36), (512, 128, 20), (128, 256, 40), (100, 128, 99), (256, 64, 72)])
def test_a_few_panels_take_whole_vectors(M, K, N):
  """N that no whole vector divides, padded to 2 or 3 panels (the ones that ran as scalar dot products, 30x slower: the
  panel range wasn't split under 4 panels), or 36/20/40 (4-lane unrolls, half vectors): the product's kernel has
  whole-vector accumulators. Values against numpy."""
  r = Device["CPU"].renderer
  if not r.matmul_padded_panels(M, K, N, False): pytest.skip("this CPU's tile has no padded panels")
  assert _width(M, K, N) == -(-N // 32) * 32
  a, b = _rng(M, K), _rng(K, N, seed=9)
  out = Tensor(a) @ Tensor(b)
  assert f"tc_float_{r.tiling.cols // 2} acc0" in _matmul_kernel_src(out)
  _check(out, a.astype(np.float64) @ b, K)

@pytest.mark.parametrize("B,M,K,N,tr", [(16, 77, 64, 77, False), (16, 77, 64, 77, True), (32, 33, 65, 17, False), (8, 127, 64, 129, False)])
def test_a_batch_of_small_ragged_products_pads(B, M, K, N, tr):
  """A batch (attention-like q @ k^T at 77 tokens) whose matrices are each under the million multiply-adds, together
  over it: padded (16x77x64x77 on one core 3.2 -> 0.44 ms; it was 0.05x torch)."""
  r = Device["CPU"].renderer
  if not r.matmul_padded_panels(B * M, K, N, tr): pytest.skip("this CPU's tile has no padded panels")
  a, w = _rng(B, M, K), _rng(B, N, K, seed=10) if tr else _rng(B, K, N, seed=10)
  rhs = Tensor(w).transpose(-1, -2) if tr else Tensor(w)
  assert rhs._panels(Tensor(a)).shape[-1] == -(-N // 32) * 32
  out = Tensor(a) @ rhs
  assert f"tc_float_{r.tiling.cols // 2} acc0" in _matmul_kernel_src(out)
  w64 = np.swapaxes(w, -1, -2) if tr else w
  _check(out, a.astype(np.float64) @ w64.astype(np.float64), K)
