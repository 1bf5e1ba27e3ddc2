"""The smoke set every backend must pass first (after tinygrad's test_tiny): tiny kernels of each kind."""
import numpy as np
from tinycore import Tensor, Device
from tinycore.testing.helpers import check

def test_const(): check(Tensor(2.0) + 0, np.float32(2.0))
def test_copy():
  t = Tensor([1.0, 2.0, 3.0], device="CPU").to(Device.DEFAULT)
  check(t, np.array([1, 2, 3], np.float32))
def test_plus(): check(Tensor([1.0, 2, 3]) + Tensor([4.0, 5, 6]), np.array([5, 7, 9], np.float32))
def test_plus_int(): check(Tensor([1, 2, 3]) + Tensor([4, 5, 6]), np.array([5, 7, 9], np.int32))
def test_plus_big():
  a = np.arange(1 << 16, dtype=np.float32)
  check(Tensor(a) + Tensor(a), a + a)
def test_cat(): check(Tensor.ones(2, 3).cat(Tensor.zeros(1, 3)), np.concatenate([np.ones((2, 3)), np.zeros((1, 3))]).astype(np.float32))
def test_sum(): check(Tensor.ones(256).sum(), np.float32(256))
def test_sum_big(): check(Tensor.ones(1 << 16).sum(), np.float32(1 << 16))
def test_eye(): check(Tensor.eye(3), np.eye(3, dtype=np.float32))
def test_arange(): check(Tensor.arange(10), np.arange(10, dtype=np.int32))
def test_gemm():
  a = np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32)
  check(Tensor(a) @ Tensor(a).T, a @ a.T, atol=1e-4)
def test_gemv():
  a = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
  check(Tensor(a) @ Tensor(a[0]), a @ a[0], atol=1e-4)
def test_random():
  Tensor.manual_seed(1337)
  x = Tensor.rand(1000).numpy()
  assert x.dtype == np.float32 and x.shape == (1000,) and 0 <= x.min() and x.max() < 1 and 0.4 < x.mean() < 0.6
def test_relu_softmax():
  x = np.array([[-1.0, 0.0, 2.0]], np.float32)
  check(Tensor(x).relu().softmax(), np.exp(np.maximum(x, 0)) / np.exp(np.maximum(x, 0)).sum(), atol=1e-6)
def test_small_conv_model():
  # a tiny mnist-like forward: conv -> relu -> pool -> linear
  r = np.random.default_rng(2)
  x, w = r.standard_normal((2, 1, 8, 8)).astype(np.float32), r.standard_normal((4, 1, 3, 3)).astype(np.float32)
  l = r.standard_normal((36, 10)).astype(np.float32)
  out = Tensor(x).conv2d(Tensor(w)).relu().max_pool2d().flatten(1) @ Tensor(l)
  from numpy.lib.stride_tricks import sliding_window_view as swv
  c = np.einsum("bchwij,ocij->bohw", swv(x, (3, 3), axis=(2, 3)), w)
  p = np.maximum(c, 0).reshape(2, 4, 3, 2, 3, 2).max((3, 5)).reshape(2, 36)
  check(out, p @ l, atol=1e-4)
def test_jit():
  from tinycore import TinyJit
  @TinyJit
  def f(a, b): return (a + b).realize()
  for i in range(3):
    a, b = Tensor([1.0, 2.0]) * i, Tensor([3.0, 4.0])
    check(f(a.realize(), b.realize()), np.array([1.0 * i + 3, 2.0 * i + 4], np.float32))
