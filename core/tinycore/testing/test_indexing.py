"""Indexing against numpy: basic, advanced (tensor/list/bool), __setitem__, gather/scatter, one_hot, masked ops, sort/topk."""
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.testing.helpers import check, rand

X = rand(3, 4, 5)

@pytest.mark.parametrize("idx", [
  (1,), (-1, 2), (slice(1, 3),), (slice(None, None, 2), slice(None), slice(4, 0, -2)), (Ellipsis, 1), (None, 0, None),
  (slice(5, 10),), (slice(None, None, -1),), (0, Ellipsis, None)], ids=str)
def test_basic(idx): check(Tensor(X)[idx], X[idx])

@pytest.mark.parametrize("idx", [
  ([0, 2],), ([[0, 1], [2, 2]],), (slice(None), [3, 0, 3]), ([1, 0], slice(None), [4, 4]),
  ([2, 1], [3, 0]), (Ellipsis, [-1, 0]), (slice(None), np.array([1, 2]), None), (X[:, 0, 0] > 0,)], ids=lambda i: str(i)[:40])
def test_advanced(idx): check(Tensor(X)[tuple(Tensor(i) if isinstance(i, np.ndarray) and i.dtype != bool and False else i for i in idx)], X[idx])

def test_int_index_is_basic():
  # torch and tinygrad, not numpy: an int applies first as a basic index, so the list's dims stay where the list is
  check(Tensor(X)[0, :, [1, 4]], X[0][:, [1, 4]])
  check(Tensor(X)[[1, 0], 2, [4, 4]], X[:, 2][[1, 0], [4, 4]])

def test_advanced_tensor_index_and_dtypes():
  check(Tensor(X)[Tensor([2, 0])], X[[2, 0]]); check(Tensor(X)[:, Tensor([[1], [2]])], X[:, [[1], [2]]])
  xi = np.arange(12, dtype=np.int32).reshape(3, 4)
  check(Tensor(xi)[[0, 2], [1, 3]], xi[[0, 2], [1, 3]]); check(Tensor(xi.astype(bool))[[1]], xi.astype(bool)[[1]])
  check(Tensor(X).permute(2, 0, 1)[[1, 3]], X.transpose(2, 0, 1)[[1, 3]])

def test_index_errors():
  t = Tensor(X)
  with pytest.raises(IndexError, match="out of bounds"): t[3]
  with pytest.raises(IndexError, match="out of bounds"): t[:, [0, 4]]
  with pytest.raises(IndexError, match="too many"): t[0, 0, 0, 0]
  with pytest.raises(IndexError): t[[0.5]]
  with pytest.raises(TypeError): t["a"]

@pytest.mark.parametrize("idx,val", [((0,), 1.0), ((slice(1, 3), 2), -1.0), ((Ellipsis, slice(None, None, 2)), 5.0),
                                     ((slice(None), [0, 3]), 7.0), (([2, 0], 1, [4, 4]), 3.0), ((slice(None, None, -1), 0), 2.0)], ids=str)
def test_setitem(idx, val):
  t, e = Tensor(X) + 0, X.copy()
  t[idx] = val; e[idx] = val
  check(t, e)
def test_setitem_tensor_value():
  t, e = Tensor(X) + 0, X.copy()
  v = rand(3, 5, seed=9)
  t[:, 1] = Tensor(v); e[:, 1] = v
  check(t, e)
  t[1:, 2, :] = Tensor(v[0]); e[1:, 2, :] = v[0]
  check(t, e)
  with pytest.raises(ValueError, match="shape"): t[:, 1] = Tensor.ones(4)

def test_gather_scatter():
  idx = np.array([[0, 2, 1], [2, 2, 0]], np.int32)   # int32: every backend has it (WGSL has no 64-bit ints)
  x2 = X[:, :, 0]   # (3, 4); torch semantics: the index may be smaller than the input outside `dim`
  check(Tensor(x2).gather(1, Tensor(idx)), np.array([[x2[i, idx[i, j]] for j in range(3)] for i in range(2)], np.float32))
  check(Tensor(x2).gather(0, Tensor(idx)), np.array([[x2[idx[i, j], j] for j in range(3)] for i in range(2)], np.float32))
  base, src = np.zeros((3, 4), np.float32), rand(2, 3, seed=5)
  exp = base.copy()
  for i in range(2):
    for j in range(3): exp[i, idx[i, j]] = src[i, j]
  idx_u = np.array([[0, 2, 1], [3, 1, 0]], np.int32)
  exp = base.copy()
  for i in range(2):
    for j in range(3): exp[i, idx_u[i, j]] = src[i, j]
  check(Tensor(base).scatter(1, Tensor(idx_u), Tensor(src)), exp)
  exp_add = base.copy() + 1
  for i in range(2):
    for j in range(3): exp_add[idx[i, j], j] += src[i, j]
  check(Tensor(base + 1).scatter_reduce(0, Tensor(idx), Tensor(src), "sum"), exp_add)
  # tinygrad: scatter's reduce= takes a scalar src only (torch's tensor form is deprecated there); scatter_reduce is the way
  with pytest.raises(TypeError): Tensor(base + 1).scatter(0, Tensor(idx), Tensor(src), reduce="add")
  exp_add2 = base.copy() + 1
  for i in range(2):
    for j in range(3): exp_add2[idx[i, j], j] += 2.0
  check(Tensor(base + 1).scatter(0, Tensor(idx), 2.0, reduce="add"), exp_add2)
  exp_max = base.copy()
  for i in range(2):
    for j in range(3): exp_max[idx[i, j], j] = max(exp_max[idx[i, j], j], src[i, j])
  check(Tensor(base).scatter_reduce(0, Tensor(idx), Tensor(src), "amax"), exp_max)
  with pytest.raises(ValueError): Tensor(base).gather(0, Tensor(np.zeros((3,), np.int32)))
  with pytest.raises(TypeError): Tensor(base).gather(0, Tensor(np.zeros((3, 4), np.float32)))

def test_one_hot_masked():
  y = np.array([0, 3, 1], np.int32)
  check(Tensor(y).one_hot(4), np.eye(4, dtype=np.int32)[y]); check(Tensor(y).one_hot(), np.eye(4, dtype=np.int32)[y])
  m = X > 0
  check(Tensor(X).masked_fill(Tensor(m), 0.0), np.where(m, 0, X).astype(np.float32)); check(Tensor(X).masked_select(Tensor(m)), X[m])
  check(Tensor(X).masked_select(Tensor(np.zeros_like(m))), X[np.zeros_like(m)])

@pytest.mark.parametrize("dim", [-1, 0])
def test_sort_topk(dim):
  x = rand(4, 6, seed=11)
  v, i = Tensor(x).sort(dim)
  check(v, np.sort(x, dim)); check(i, np.argsort(x, dim, kind="stable").astype(np.int32))
  v, i = Tensor(x).sort(dim, descending=True)
  check(v, -np.sort(-x, dim)); check(Tensor(x).argsort(dim, descending=True), np.argsort(-x, dim, kind="stable").astype(np.int32))
  v, i = Tensor(x).topk(2, dim)
  check(v, np.take(-np.sort(-x, dim), [0, 1], axis=dim)); check(i, np.take(np.argsort(-x, dim, kind="stable"), [0, 1], axis=dim).astype(np.int32))
  ties = np.array([2, 1, 2, 1, 0], np.int32)
  check(Tensor(ties).argsort(), np.argsort(ties, kind="stable").astype(np.int32))

def test_setitem_realized_in_place():
  # setitem on a realized buffer assigns in place: other references to the same tensor object see it
  t = Tensor.zeros(3, 4).contiguous().realize()
  e = np.zeros((3, 4), np.float32)
  t[1] = 9; e[1] = 9
  t[:, [0, 3]] = -1.0; e[:, [0, 3]] = -1.0
  t[2, 1:3] = Tensor([5.0, 6.0]); e[2, 1:3] = [5.0, 6.0]
  check(t, e)
  ti = Tensor(np.arange(6, dtype=np.int32)).contiguous().realize()
  ti[::2] = 0
  check(ti, np.array([0, 1, 0, 3, 0, 5], np.int32))
