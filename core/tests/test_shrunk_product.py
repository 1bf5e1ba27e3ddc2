"""A slice that keeps most of a big matrix product ((a @ b)[:, :1000]) reads the product computed whole, from its own
buffer (engine/schedule.py's _shrunk_product): pushed into the product's kernel the slice left ragged tiles (1.3 s
instead of 21 ms at 1024^3 on a CPU core). A slice that keeps little of it, or a small product, still fuses."""
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.uop import Ops

pytestmark = pytest.mark.needs_device

def _reduce_outputs(t: Tensor) -> list[int]:
  """The output sizes of the kernels of t's schedule that hold a reduction."""
  return [si.bufs[0].size for si in t.schedule() if not si.is_copy and any(u.op is Ops.REDUCE_AXIS for u in si.ast.toposort())]

def _rng(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)

@pytest.mark.parametrize("sl", [np.s_[:, :200], np.s_[:, 24:], np.s_[:200], np.s_[3:250, 1:255]])
def test_a_slice_keeping_most_of_a_product_reads_it_whole(sl):
  a, b = _rng(256, 256), _rng(256, 256, seed=1)
  out = (Tensor(a) @ Tensor(b))[sl]
  assert _reduce_outputs(out) == [256 * 256]
  np.testing.assert_allclose(out.numpy(), (a.astype(np.float64) @ b)[sl], rtol=1e-4, atol=1e-3)

def test_a_transposed_slice_and_later_math():
  # (320 columns: whole panels, so a CPU doesn't pad the product, which would make it whole by itself)
  a, b, c = _rng(256, 256), _rng(320, 256, seed=2), _rng(250, seed=3)
  out = ((Tensor(a) @ Tensor(b).T).T[:250] + Tensor(c).reshape(250, 1)).relu()
  assert _reduce_outputs(out) == [256 * 320]
  np.testing.assert_allclose(out.numpy(), np.maximum((a.astype(np.float64) @ b.T).T[:250] + c[:, None], 0), rtol=1e-4, atol=1e-3)

def test_small_slices_and_small_products_still_fuse():
  a, b = _rng(256, 256), _rng(256, 256, seed=4)
  few = (Tensor(a) @ Tensor(b))[:, :100]   # keeps 39%: the slice is computed alone
  assert _reduce_outputs(few) == [256 * 100]
  np.testing.assert_allclose(few.numpy(), (a.astype(np.float64) @ b)[:, :100], rtol=1e-4, atol=1e-3)
  small = Tensor(a[:32, :32]) @ Tensor(b[:32, :32])
  assert _reduce_outputs(small[:, :30]) == [32 * 30]
  sums = Tensor(a).sum(axis=1)[:200]       # not a product
  assert _reduce_outputs(sums) == [200]
