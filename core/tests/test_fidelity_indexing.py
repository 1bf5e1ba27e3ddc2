"""Every indexing form against torch: ints, slices (reversed, out of bounds, empty), None/Ellipsis, lists, tuples, int and
bool tensors, and mixes of them, with gradients; gather/scatter/scatter_reduce, masked_select/nonzero with size=."""
import numpy as np
import pytest
torch = pytest.importorskip("torch")
from tinycore import Tensor, dtypes
from _torch_ref import check, same

pytestmark = pytest.mark.needs_device
R = np.random.default_rng(1)
X = R.standard_normal((4, 5, 6)).astype(np.float32)
I = np.array([[0, 2], [3, 1]], np.int64)

@pytest.mark.parametrize("idx", [
  (1,), (-1, 2), (slice(1, 3),), (slice(-2, 2),), (slice(5, 10),), (slice(-15, -7),), (slice(1, 1),),
  (None, 1, Ellipsis, None), (Ellipsis, slice(0, 6, 4)), ([0, 3],), ((0, 3),), (((1,), (2,)),), ([True, False, True, False],),
  ([True, False, 2],), (slice(None), [4, 0, 4]), (1, slice(None), [1, 5]), ([1, 0], 2, [5, 5]), (slice(None), 3, [0, 1]),
  ([[0], [1]], slice(1, 4), [2, 3]), (Ellipsis, [-1, 0]), ([3, 0], None, [1, 1])], ids=str)
def test_getitem_matches_torch(idx):
  check(lambda x: x[idx], X)

def test_negative_step_matches_numpy():
  # torch has no negative slice steps; numpy (and tinygrad) do
  for idx in [(slice(None, None, -1),), (slice(None), slice(4, 0, -2)), (Ellipsis, slice(-1, -7, -3))]:
    np.testing.assert_array_equal(Tensor(X)[idx].numpy(), X[idx])

@pytest.mark.parametrize("mk", ["int tensor", "bool tensor", "int tensor, int, slice"])
def test_getitem_tensor_indices(mk):
  if mk == "int tensor": check(lambda x: x[Tensor(I.astype(np.int32)), 1] if isinstance(x, Tensor) else x[torch.tensor(I), 1], X)
  elif mk == "bool tensor":
    m = X[:, :, 0] > 0
    check(lambda x: x[Tensor(m)] if isinstance(x, Tensor) else x[torch.tensor(m)], X)
  else: check(lambda x: x[Tensor(I.astype(np.int32)), 2, 1:4] if isinstance(x, Tensor) else x[torch.tensor(I), 2, 1:4], X)

def test_getitem_index_errors():
  t = Tensor(X)
  with pytest.raises(IndexError): t[Tensor([1.5])]            # float tensor index
  with pytest.raises(IndexError): t[[1.5]]
  with pytest.raises(IndexError): t[Tensor([True, False])]    # mask shorter than the dim
  with pytest.raises(IndexError): t[[True, False]]
  with pytest.raises(IndexError): t[4]
  with pytest.raises(IndexError): t[:, [0, 5]]
  with pytest.raises(IndexError): t[0, 0, 0, 0]
  with pytest.raises((IndexError, ValueError)): t[Tensor([[0], [1], [2]]), Tensor([[0, 1, 2, 3]]), Tensor([0, 1])]

@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_gather(dim):
  idx = R.integers(0, 4, (3, 4, 5))
  check(lambda x: x.gather(dim, Tensor(idx.astype(np.int32))) if isinstance(x, Tensor) else x.gather(dim, torch.tensor(idx)), X)

def test_gather_errors():
  with pytest.raises(RuntimeError): Tensor(X).gather(0, Tensor([1]))                        # ndim mismatch
  with pytest.raises(RuntimeError): Tensor(X[:2, :1, :1]).gather(0, Tensor(np.zeros((3, 4, 5), np.int32)))   # index larger off dim
  with pytest.raises(TypeError): Tensor(X).gather(0, Tensor(np.zeros((1, 1, 1), np.float32)))

@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_last_write_wins(dim):
  # duplicates: torch on CPU keeps the last source along dim (its documented nondeterminism aside, CPU is sequential)
  idx = np.zeros((2, 3, 4), np.int64)
  src = R.standard_normal((2, 3, 4)).astype(np.float32)
  same(Tensor(X).scatter(dim, Tensor(idx.astype(np.int32)), Tensor(src)), torch.tensor(X).scatter(dim, torch.tensor(idx), torch.tensor(src)))

def test_scatter_scalar_and_reduce():
  idx = R.integers(0, 4, (3, 4, 5))
  ti, oi = torch.tensor(idx), Tensor(idx.astype(np.int32))
  same(Tensor(X).scatter(1, oi, 2.5), torch.tensor(X).scatter(1, ti, 2.5))
  same(Tensor(X).scatter(1, oi, 2.0, reduce="add"), torch.tensor(X).scatter(1, ti, 2.0, reduce="add"))
  src = R.standard_normal((4, 5, 6)).astype(np.float32)
  for red in ("sum", "prod", "mean", "amax", "amin"):
    for inc in (True, False):
      same(Tensor(X).scatter_reduce(0, oi, Tensor(src), red, include_self=inc),
           torch.tensor(X).scatter_reduce(0, ti, torch.tensor(src), red, include_self=inc), atol=1e-4)

def test_scatter_errors():
  oi = Tensor(np.zeros((2, 2, 2), np.int32))
  with pytest.raises(TypeError): Tensor(X).scatter(0, oi, Tensor(X), reduce="add")     # tensor src with reduce: scatter_reduce
  with pytest.raises(RuntimeError): Tensor(X).scatter_reduce(0, oi, Tensor(X), "median")
  with pytest.raises(RuntimeError): Tensor(X).half().scatter(0, oi, Tensor(X))          # dtype mismatch
  with pytest.raises(RuntimeError): Tensor(X).scatter(0, Tensor(np.zeros((5, 6, 7), np.int32)), Tensor(X))

def test_masked_select_and_nonzero_size():
  v, m = Tensor([5, 6, 7, 8, 9]), Tensor([True, False, True, True, False])
  np.testing.assert_array_equal(v.masked_select(m, size=2).numpy(), [5, 7])
  np.testing.assert_array_equal(v.masked_select(m, size=5, fill_value=-3).numpy(), [5, 7, 8, -3, -3])
  assert Tensor([1.0, 2.0]).masked_select(Tensor([True, True]), size=3, fill_value=-1).dtype == dtypes.default_float
  x = R.integers(0, 2, (3, 4)).astype(np.int32)
  exp = np.argwhere(x)
  np.testing.assert_array_equal(Tensor(x).nonzero(size=len(exp)).numpy(), exp)
  np.testing.assert_array_equal(Tensor(x).nonzero(size=len(exp) + 2, fill_value=-1).numpy(), np.concatenate([exp, -np.ones((2, 2), int)]))
  assert Tensor(3).nonzero(size=2).shape == (2, 0) and Tensor(3).nonzero().shape == (1, 0) and Tensor(0).nonzero().shape == (0, 0)
  with pytest.raises(RuntimeError): v.masked_select(Tensor([1, 0, 1, 1, 0]))

def test_one_hot():
  y = np.array([[1, 0, 3], [2, 2, 0]], np.int64)
  same(Tensor(y.astype(np.int32)).one_hot(5), torch.nn.functional.one_hot(torch.tensor(y), 5).int())
  same(Tensor(y.astype(np.int32)).one_hot(), torch.nn.functional.one_hot(torch.tensor(y)).int())   # None infers, like torch's -1
  with pytest.raises(ValueError): Tensor([1, 2]).one_hot(-1)
  with pytest.raises(RuntimeError): Tensor([1.0]).one_hot(3)
