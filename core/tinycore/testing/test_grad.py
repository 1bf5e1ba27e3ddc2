"""Gradients on the device under test, against analytic numpy gradients: elementwise, reduce, matmul, conv and indexing.
Inputs avoid ties and kinks (those have their own conventions, tested with the ops)."""
import numpy as np
import pytest
from tinycore import Tensor
from tinycore.testing.helpers import rand
from tinycore.testing.test_nn_ops import np_conv

def _grads(f, *xs):
  ts = [Tensor(x, requires_grad=True) for x in xs]
  f(*ts).backward()
  return [t.grad.numpy() for t in ts]

def close(g, e, tol=1e-4): np.testing.assert_allclose(g, e, rtol=tol, atol=tol)

@pytest.mark.parametrize("n", [1, 15, 16, 17, 33])
def test_elementwise(n):
  x, y = rand(3, n, seed=1), rand(3, n, seed=2)
  gx, gy = _grads(lambda a, b: (a * b + a.exp() - b.sigmoid() + (a * a + 1).sqrt() + b.tanh() * a).sum(), x, y)
  s, t = 1 / (1 + np.exp(-y)), np.tanh(y)
  close(gx, y + np.exp(x) + x / np.sqrt(x * x + 1) + t)
  close(gy, x - s * (1 - s) + (1 - t * t) * x)

def test_log_div_pow():
  x, y = rand(4, 5, seed=3, low=0.5, high=3), rand(4, 5, seed=4, low=0.5, high=3)
  gx, gy = _grads(lambda a, b: (a.log() / b + a ** 3).sum(), x, y)
  close(gx, 1 / (x * y) + 3 * x ** 2, 1e-3)
  close(gy, -np.log(x) / y ** 2, 1e-3)

@pytest.mark.parametrize("axis", [0, 1, None])
def test_reduce(axis):
  x = rand(6, 7, seed=5)
  w = rand(*np.sum(x, axis=axis, keepdims=True).shape, seed=6)
  gs, = _grads(lambda a: (a.sum(axis=axis, keepdim=True) * Tensor(w)).sum(), x)
  close(gs, np.broadcast_to(w, x.shape))
  gm, = _grads(lambda a: (a.mean(axis=axis, keepdim=True) * Tensor(w)).sum(), x)
  close(gm, np.broadcast_to(w, x.shape) / (x.size / w.size))
  # max: distinct values, so the whole gradient goes to the argmax
  gx, = _grads(lambda a: (a.max(axis=axis, keepdim=True) * Tensor(w)).sum(), x)
  e = np.zeros_like(x)
  m = x == np.max(x, axis=axis, keepdims=True)
  e[m] = np.broadcast_to(w, x.shape)[m]
  close(gx, e)

def test_softmax_logsumexp():
  x = rand(3, 10, seed=7)
  g = rand(3, 10, seed=8)
  gx, = _grads(lambda a: (a.softmax(-1) * Tensor(g)).sum() + a.logsumexp(-1).sum(), x)
  s = np.exp(x - x.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
  close(gx, s * (g - (g * s).sum(-1, keepdims=True)) + s)

@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 7, 3), (16, 17, 15), (33, 8, 32)])
def test_matmul(m, k, n):
  a, b, g = rand(m, k, seed=9), rand(k, n, seed=10), rand(m, n, seed=11)
  ga, gb = _grads(lambda x, y: (x @ y * Tensor(g)).sum(), a, b)
  close(ga, g @ b.T, 1e-4 * max(1, n))
  close(gb, a.T @ g, 1e-4 * max(1, m))

@pytest.mark.parametrize("kw", [{}, {"padding": 1, "stride": 2}], ids=str)
def test_conv2d(kw):
  x, w = rand(2, 2, 5, 5, seed=12), rand(3, 2, 3, 3, seed=13)
  g = rand(*np_conv(x, w, **kw).shape, seed=14)
  gx, gw = _grads(lambda a, b: (a.conv2d(b, **kw) * Tensor(g)).sum(), x, w)
  # the loss is linear in each argument: its gradient is the loss of each unit input
  def unit_grads(shape, f):
    out = np.zeros(shape, np.float64)
    for i in np.ndindex(*shape):
      e = np.zeros(shape, np.float32); e[i] = 1
      out[i] = (f(e) * g).sum()
    return out
  close(gx, unit_grads(x.shape, lambda e: np_conv(e, w, **kw)), 1e-3)
  close(gw, unit_grads(w.shape, lambda e: np_conv(x, e, **kw)), 1e-3)

def test_indexing_gather_scatters_back():
  x = rand(6, 4, seed=15)
  idx = np.array([0, 3, 3, 5, 0, 0], np.int32)   # repeated rows: their gradients add up
  g = rand(len(idx), 4, seed=16)
  gx, = _grads(lambda a: (a[Tensor(idx)] * Tensor(g)).sum(), x)
  e = np.zeros_like(x); np.add.at(e, idx, g)
  close(gx, e)

def test_slice_pad_permute():
  x = rand(5, 6, seed=17)
  gx, = _grads(lambda a: (a[1:4, ::2].pad(((1, 0), (0, 2))).permute(1, 0) * Tensor(np.arange(20, dtype=np.float32).reshape(5, 4))).sum(), x)
  w = np.arange(20, dtype=np.float32).reshape(5, 4).T   # (4, 5) in the padded layout
  e = np.zeros_like(x); e[1:4, ::2] = w[1:, :3]
  close(gx, e)
