"""Autograd: each gradient rule against torch (when installed) or finite differences, then composites and the API."""
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
from tinycore import Tensor, dtypes

try: import torch
except ImportError: torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

rng = np.random.default_rng(0)
def _rand(shape, lo=-2.0, hi=2.0): return rng.uniform(lo, hi, size=shape).astype(np.float32)

def _check(f, *arrs, tf=None, atol=1e-4, rtol=1e-3):
  """Run f on tinycore and torch tensors built from the same arrays; compare forward values and every input's grad."""
  ts = [Tensor(a, requires_grad=True) for a in arrs]
  out = f(*ts)
  grads = out.sum().gradient(*ts) if out.shape != () else out.gradient(*ts)
  Tensor.realize(out, *grads)  # one schedule for forward and backward
  tts = [torch.tensor(a, requires_grad=True) for a in arrs]
  tout = (tf or f)(*tts)
  tout.sum().backward()
  np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), atol=atol, rtol=rtol)
  for g, tt in zip(grads, tts):
    assert g.shape == tuple(tt.shape)
    np.testing.assert_allclose(g.numpy(), tt.grad.numpy(), atol=atol, rtol=rtol)

# ---- finite differences (no torch needed)
def _fd(fnp, x: np.ndarray, eps=1e-5) -> np.ndarray:
  x = x.astype(np.float64); g = np.zeros_like(x)
  for i in np.ndindex(x.shape):
    xp, xm = x.copy(), x.copy(); xp[i] += eps; xm[i] -= eps
    g[i] = (fnp(xp).sum() - fnp(xm).sum()) / (2 * eps)
  return g

@pytest.mark.parametrize("name,f,fnp,lo,hi", [
  ("mul_add", lambda x: x * x * 3 + x, lambda x: x * x * 3 + x, -2, 2),
  ("exp2", lambda x: x.exp2(), lambda x: np.exp2(x), -2, 2),
  ("log2", lambda x: x.log2(), lambda x: np.log2(x), 0.5, 3),
  ("sin", lambda x: x.sin(), np.sin, -3, 3),
  ("sqrt", lambda x: x.sqrt(), np.sqrt, 0.5, 3),
  ("recip", lambda x: x.reciprocal(), lambda x: 1 / x, 0.5, 3),
  ("max_axis", lambda x: x.max(axis=1), lambda x: x.max(axis=1), -2, 2),
])
def test_finite_differences(name, f, fnp, lo, hi):
  x = _rand((2, 3), lo, hi)
  t = Tensor(x, requires_grad=True)
  g, = f(t).sum().gradient(t)
  np.testing.assert_allclose(g.numpy(), _fd(fnp, x), atol=1e-3, rtol=1e-3)

# ---- one rule at a time, against torch
@needs_torch
@pytest.mark.parametrize("name,f,lo,hi", [
  ("add", lambda a, b: a + b, -2, 2), ("sub", lambda a, b: a - b, -2, 2), ("mul", lambda a, b: a * b, -2, 2),
  ("div", lambda a, b: a / b, 0.5, 2), ("maximum", lambda a, b: a.maximum(b), -2, 2), ("minimum", lambda a, b: a.minimum(b), -2, 2),
])
def test_binary(name, f, lo, hi): _check(f, _rand((3, 4), lo, hi), _rand((3, 4), lo, hi))

@needs_torch
def test_where(): _check(lambda a, b: (a > b).where(a * 2, b * b), _rand((3, 4)), _rand((3, 4)), tf=lambda a, b: torch.where(a > b, a * 2, b * b))

@needs_torch
def test_broadcast_binary(): _check(lambda a, b: a * b + a, _rand((3, 1, 4)), _rand((2, 1)))

@needs_torch
@pytest.mark.parametrize("name,f,lo,hi", [
  ("neg", lambda x: -x, -2, 2), ("exp", lambda x: x.exp(), -2, 2), ("log", lambda x: x.log(), 0.2, 3),
  ("sqrt", lambda x: x.sqrt(), 0.2, 3), ("rsqrt", lambda x: x.rsqrt(), 0.2, 3), ("sin", lambda x: x.sin(), -3, 3),
  ("cos", lambda x: x.cos(), -3, 3), ("reciprocal", lambda x: x.reciprocal(), 0.5, 3), ("relu", lambda x: x.relu(), -2, 2),
  ("sigmoid", lambda x: x.sigmoid(), -3, 3), ("tanh", lambda x: x.tanh(), -2, 2), ("abs", lambda x: x.abs(), -2, 2),
  ("trunc", lambda x: x.trunc() * x, -3, 3), ("square", lambda x: x.square(), -2, 2), ("pow3", lambda x: x ** 3, -2, 2),
  ("pow_frac", lambda x: x ** 1.5, 0.5, 2), ("clamp", lambda x: x.clamp(-1, 1), -2, 2),
])
def test_unary(name, f, lo, hi): _check(f, _rand((2, 5), lo, hi))

def test_max_ties_split():
  a = Tensor(np.array([1., 3., 3.], np.float32), requires_grad=True); b = Tensor(np.array([1., 2., 5.], np.float32), requires_grad=True)
  ga, gb = a.maximum(b).sum().gradient(a, b)
  np.testing.assert_allclose(ga.numpy(), [0.5, 1, 0]); np.testing.assert_allclose(gb.numpy(), [0.5, 0, 1])
  x = Tensor(np.array([[2., 1., 2.], [0., 4., 1.]], np.float32), requires_grad=True)
  g, = x.max(axis=1).sum().gradient(x)
  np.testing.assert_allclose(g.numpy(), [[0.5, 0, 0.5], [0, 1, 0]])

def test_cast_and_compare():
  x = Tensor(np.array([1.5, -2.0], np.float32), requires_grad=True)
  g, = (x.cast(dtypes.float64) * 3).cast(dtypes.float32).sum().gradient(x)
  assert g.dtype == dtypes.float32
  np.testing.assert_allclose(g.numpy(), [3, 3])
  g, = ((x > 0).cast(dtypes.float32) * x).sum().gradient(x)  # the comparison contributes nothing
  np.testing.assert_allclose(g.numpy(), [1, 0])

@needs_torch
@pytest.mark.parametrize("name,f,tf", [
  ("sum_axis", lambda x: x.sum(axis=1), None), ("sum_all", lambda x: x.sum(), None),
  ("mean", lambda x: x.mean(axis=0), None), ("max", lambda x: x.max(axis=1), lambda x: x.amax(dim=1)),
  ("min", lambda x: x.min(axis=0), lambda x: x.amin(dim=0)), ("var", lambda x: x.var(axis=1), None),
  ("prod", lambda x: x.prod(axis=1), None),
])
def test_reduce(name, f, tf): _check(f, _rand((3, 4)), tf=tf)

def test_prod_with_zeros():
  x = np.array([[2., 0., 3.], [0., 0., 5.], [1., 2., 4.]], np.float32)
  t = Tensor(x, requires_grad=True)
  g, = t.prod(axis=1).sum().gradient(t)
  np.testing.assert_allclose(g.numpy(), [[0, 6, 0], [0, 0, 0], [8, 4, 2]])

@needs_torch
@pytest.mark.parametrize("name,f,tf", [
  ("reshape", lambda x: x.reshape(4, 3) * Tensor(np.arange(12, dtype=np.float32).reshape(4, 3)),
   lambda x: x.reshape(4, 3) * torch.arange(12.).reshape(4, 3)),
  ("permute", lambda x: x.permute(1, 0) * Tensor(np.arange(12, dtype=np.float32).reshape(4, 3)),
   lambda x: x.permute(1, 0) * torch.arange(12.).reshape(4, 3)),
  ("expand", lambda x: x.reshape(3, 1, 4).expand(3, 2, 4) * Tensor(np.arange(24, dtype=np.float32).reshape(3, 2, 4)),
   lambda x: x.reshape(3, 1, 4).expand(3, 2, 4) * torch.arange(24.).reshape(3, 2, 4)),
  ("pad", lambda x: x.pad(((1, 0), (0, 2))) * Tensor(np.arange(24, dtype=np.float32).reshape(4, 6)),
   lambda x: torch.nn.functional.pad(x, (0, 2, 1, 0)) * torch.arange(24.).reshape(4, 6)),
  ("shrink", lambda x: x.shrink(((1, 3), (0, 2))).exp(), lambda x: x[1:3, 0:2].exp()),
  ("flip", lambda x: x.flip(1) * Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)), lambda x: x.flip(1) * torch.arange(12.).reshape(3, 4)),
  ("getitem", lambda x: x[1:, ::2] * 2 + x[0, ::2], None),
  ("getitem_neg_step", lambda x: x[::-1, 1] * Tensor(np.array([1., 2., 3.], np.float32)), lambda x: x.flip(0)[:, 1] * torch.tensor([1., 2., 3.])),
  ("cat", lambda x: Tensor.cat(x, x * 2, dim=1).exp(), lambda x: torch.cat([x, x * 2], dim=1).exp()),
  ("contiguous", lambda x: x.contiguous() * x, None),
])
def test_movement(name, f, tf): _check(f, _rand((3, 4)), tf=tf)

# ---- composites
@needs_torch
def test_matmul(): _check(lambda a, b: a @ b, _rand((3, 4)), _rand((4, 5)))

@needs_torch
def test_batched_matmul(): _check(lambda a, b: (a @ b).relu(), _rand((2, 3, 4)), _rand((4, 2)))

@needs_torch
def test_softmax(): _check(lambda x: x.softmax(-1) * Tensor(np.arange(8, dtype=np.float32).reshape(2, 4)), _rand((2, 4)),
                           tf=lambda x: x.softmax(-1) * torch.arange(8.).reshape(2, 4))

@needs_torch
def test_log_softmax(): _check(lambda x: x.log_softmax(1) * Tensor(np.arange(8, dtype=np.float32).reshape(2, 4)), _rand((2, 4)),
                               tf=lambda x: x.log_softmax(1) * torch.arange(8.).reshape(2, 4))

@needs_torch
def test_logsumexp(): _check(lambda x: x.logsumexp(1), _rand((3, 4)), tf=lambda x: x.logsumexp(1))

@needs_torch
def test_mlp_cross_entropy():
  x, w1, w2 = _rand((4, 5)), _rand((5, 6)), _rand((6, 3))
  y = np.array([0, 2, 1, 2])
  def f(x, w1, w2):
    lp = (x @ w1).relu().matmul(w2).log_softmax(-1)
    return -(lp * Tensor(np.eye(3, dtype=np.float32)[y])).sum(-1).mean()
  def tf(x, w1, w2): return torch.nn.functional.cross_entropy((x @ w1).relu() @ w2, torch.tensor(y))
  _check(f, x, w1, w2, tf=tf)

@needs_torch
def test_conv2d():
  if not hasattr(Tensor, "conv2d"): pytest.skip("Tensor.conv2d not available yet")
  _check(lambda x, w: x.conv2d(w, padding=1), _rand((1, 2, 5, 5)), _rand((3, 2, 3, 3)),
         tf=lambda x, w: torch.nn.functional.conv2d(x, w, padding=1))

@needs_torch
def test_tensor_indexing():
  idx = np.array([2, 0, 2])
  try: Tensor(_rand((3, 4)))[Tensor(idx)]
  except NotImplementedError: pytest.skip("tensor indexing not available yet")
  _check(lambda x: x[Tensor(idx)], _rand((3, 4)), tf=lambda x: x[torch.tensor(idx)])

# ---- the API
def test_gradient_returns_list_and_detach():
  a = Tensor(np.array([1., 2.], np.float32), requires_grad=True)
  b = Tensor(np.array([3., 4.], np.float32), requires_grad=True)
  gs = (a * b + a.detach() * b).sum().gradient(a, b)
  assert isinstance(gs, list) and len(gs) == 2
  np.testing.assert_allclose(gs[0].numpy(), [3, 4]); np.testing.assert_allclose(gs[1].numpy(), [2, 4])

def test_unused_target_raises():
  # a target not in the graph at all is a likely mistake (docs/compat.md); x**0 and empty slices keep x in the graph
  a = Tensor(np.array([1.], np.float32), requires_grad=True); b = Tensor(np.array([2., 3.], np.float32), requires_grad=True)
  with pytest.raises(ValueError): (a * 2).sum().gradient(b)
  (gb,) = (b ** 0).sum().gradient(b)
  np.testing.assert_array_equal(gb.numpy(), [0., 0.])

def test_backward_fills_and_accumulates():
  w = Tensor(np.array([[1., 2.], [3., 4.]], np.float32), requires_grad=True)
  x = Tensor(np.array([1., -1.], np.float32), requires_grad=False)   # explicitly False: never gets a .grad
  (w @ x).sum().backward()
  np.testing.assert_allclose(w.grad.numpy(), [[1, -1], [1, -1]])
  assert x.grad is None
  (w * w).sum().backward()
  np.testing.assert_allclose(w.grad.numpy(), [[3, 3], [7, 7]])

def test_backward_explicit_gradient():
  x = Tensor(np.array([1., 2., 3.], np.float32), requires_grad=True)
  (x * x).backward(Tensor(np.array([1., 0., 2.], np.float32)))
  np.testing.assert_allclose(x.grad.numpy(), [2, 0, 12])

def test_second_order():
  x = Tensor(np.array([1., 2.], np.float32), requires_grad=True)
  g, = (x * x * x).sum().gradient(x)
  gg, = g.sum().gradient(x)
  np.testing.assert_allclose(gg.numpy(), [6, 12])

def test_gradient_keeps_device_and_dtype():
  x = Tensor(np.array([1., 2.], np.float32), requires_grad=True)
  g, = (x.exp() * 2).sum().gradient(x)
  assert g.device == x.device and g.dtype == x.dtype

def test_realized_leaf():
  x = Tensor(np.array([0.5, 1.5], np.float32), requires_grad=True).realize()
  _y = (x * 2).realize()  # an intermediate realized before backward keeps its graph for autograd
  g, = (x.sin() * 3).sum().gradient(x)
  np.testing.assert_allclose(g.numpy(), 3 * np.cos([0.5, 1.5]), rtol=1e-5)

@needs_torch
@pytest.mark.parametrize("name,f,tf", [
  ("max_pool2d", lambda x: x.max_pool2d(2), lambda x: torch.nn.functional.max_pool2d(x, 2)),
  ("avg_pool2d", lambda x: x.avg_pool2d(2), lambda x: torch.nn.functional.avg_pool2d(x, 2)),
  ("cumsum", lambda x: x.cumsum(-1) * Tensor(np.arange(4, dtype=np.float32)), lambda x: x.cumsum(-1) * torch.arange(4.)),
  ("gather", lambda x: x.gather(-1, Tensor(np.array([[[[0, 3], [1, 1], [2, 0], [3, 2]]]]))),
   lambda x: x.gather(-1, torch.tensor([[[[0, 3], [1, 1], [2, 0], [3, 2]]]]))),
])
def test_composite_ops(name, f, tf):
  if not hasattr(Tensor, name): pytest.skip(f"Tensor.{name} not available yet")
  _check(f, _rand((1, 1, 4, 4)), tf=tf)

def test_requires_grad_set_after_construction():
  """tinygrad-style `x.requires_grad = True` after construction is seen by backward() (and setting it twice is fine)."""
  x = Tensor(np.array([1.0, 2.0, 3.0], np.float32))
  x.requires_grad = True
  x.requires_grad = True
  (x * x).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
