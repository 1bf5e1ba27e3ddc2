"""Views over symbolic sizes in the lowerer (what dynamic ONNX axes need): reshapes that add/drop 1s, split int dims
beside a Variable or merge one into it, and pads by a symbolic amount; each checked against numpy for several values."""
import numpy as np
import pytest
from tinycore import Tensor, Variable

MAXN = 16

def _view(n: int, v, shape_after):
  """arange data of `n` rows of 6 viewed at the symbolic size (a buffer for the maximum, shrunk to n rows)."""
  data = Tensor(np.arange(MAXN * 6, dtype=np.float32)).realize()
  return data.shrink(((0, v.bind(n) * 6),)).reshape(*shape_after(v.bind(n)))

@pytest.mark.needs_device
@pytest.mark.parametrize("n", [1, 3, 7])
def test_reshape_adding_ones_and_splitting_int_dims(n):
  v = Variable("n", 1, MAXN)
  x = _view(n, v, lambda s: (s, 6))
  want = np.arange(n * 6, dtype=np.float32).reshape(n, 6)
  w = Tensor(np.arange(12, dtype=np.float32).reshape(6, 2)).realize()
  got = (x @ w).sum(0)   # matmul broadcasts through (n, 6, 1) reshapes
  np.testing.assert_allclose(got.numpy(), (want @ np.arange(12, dtype=np.float32).reshape(6, 2)).sum(0), rtol=1e-6)
  split = x.reshape(x.shape[0], 2, 3).permute(2, 0, 1).sum((1, 2))   # (n, 6) -> (n, 2, 3): the int dims split
  np.testing.assert_allclose(split.numpy(), want.reshape(n, 2, 3).transpose(2, 0, 1).sum((1, 2)), rtol=1e-6)

@pytest.mark.needs_device
@pytest.mark.parametrize("n", [1, 4, 9])
def test_merging_a_symbolic_dim_unravels(n):
  v = Variable("n", 1, MAXN)
  x = _view(n, v, lambda s: (s, 6)).permute(1, 0)   # (6, n): merging it makes the index div/mod by n
  m = x.shape[1] * 6   # one expression for both sizes (6*n and n*6 are different expressions to broadcasting)
  flat = x.contiguous().reshape(m) * Tensor.ones(1)
  weights = Tensor(np.arange(MAXN * 6, dtype=np.float32)).realize().shrink(((0, m),))
  want = np.arange(n * 6, dtype=np.float32).reshape(n, 6).T.reshape(-1)
  np.testing.assert_allclose((flat * weights).sum().numpy(), (want * np.arange(n * 6)).sum(), rtol=1e-6)

@pytest.mark.needs_device
@pytest.mark.parametrize("n", [1, 5, 16])
def test_pad_by_a_symbolic_amount(n):
  v = Variable("n", 1, MAXN)
  x = _view(n, v, lambda s: (s, 6))
  b = v.bind(n)
  # a concat along the symbolic dim done as two pads: [x; ones(2, 6)] then its column sums
  top = x._wrap(x.uop.pad(((0, 2), (0, 0))))
  bottom = Tensor.ones(2, 6)._wrap(Tensor.ones(2, 6).uop.pad(((b, 0), (0, 0))))
  got = (top + bottom.reshape(top.shape)).sum(0)
  want = np.concatenate([np.arange(n * 6, dtype=np.float32).reshape(n, 6), np.ones((2, 6), np.float32)]).sum(0)
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)
