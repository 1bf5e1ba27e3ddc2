"""Gradients at ties and kinks and values/gradients at extreme inputs (+-300, +-1e3, +-inf, nan), against torch's
conventions: relu/abs/sign/clip at their kinks, maximum/minimum ties split 0.5/0.5, comparisons carry no gradient,
copysign, and the saturating activations and log-sum-exp family far from 0."""
import math
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
torch = pytest.importorskip("torch")
F = torch.nn.functional
from _torch_ref import check
from tinycore import Tensor, dtypes

KINKS = np.array([-2.0, -1.0, -0.0, 0.0, 1.0, 2.0], np.float32)
EXTREME = np.array([-1e3, -400.0, -300.0, -30.0, -1.0, 0.0, 1.0, 30.0, 300.0, 400.0, 1e3], np.float32)
SPECIAL = np.array([-math.inf, -1e3, -1.0, 0.0, 1.0, 1e3, math.inf, math.nan], np.float32)

@pytest.mark.parametrize("name", ["relu", "abs", "sign"])
def test_kinks(name):
  check(lambda x: getattr(x, name)(), KINKS, tfn=lambda x: getattr(torch, name)(x))

def test_relu_keeps_nan_and_infs():
  check(lambda x: x.relu(), SPECIAL, tfn=torch.relu)

@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (0.0, 0.0), (3.0, 0.0), (None, 0.0), (0.0, None), (-2.5, 1.5)])
def test_clip_gradient_is_one_at_the_bounds(lo, hi):
  x = np.array([-3.0, -2.5, -1.0, 0.0, 1.0, 1.5, 2.0], np.float32)
  check(lambda t: t.clip(lo, hi), x, tfn=lambda t: torch.clamp(t, lo, hi))
  # nan passes through (torch and tinygrad); its gradient is 1 here, 0 in torch (docs/compat.md)
  check(lambda t: t.clip(lo, hi), np.array([math.nan, 1.0], np.float32), tfn=lambda t: torch.clamp(t, lo, hi), grad=False)

def test_clip_with_tensor_bounds():
  x, lo, hi = np.array([-2., 0., 1., 3.], np.float32), np.array([-1., 0., 0., 0.], np.float32), np.array([1., 1., 1., 3.], np.float32)
  check(lambda a, b, c: a.clip(b, c), x, lo, hi, tfn=lambda a, b, c: torch.clamp(a, b, c))

def test_clip_without_bounds_is_runtime_error():
  with pytest.raises(RuntimeError): Tensor([1.0]).clip(None, None)

@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_ties_split_half(op):
  a = np.array([1., 0., 3., -4., 2., 2.], np.float32)
  b = np.array([-1., 0., 3., 0., 2., 5.], np.float32)
  check(lambda x, y: getattr(x, op)(y), a, b, tfn=lambda x, y: getattr(torch, op)(x, y))
  check(lambda x: getattr(x, op)(3.0), a, tfn=lambda x: getattr(torch, op)(x, torch.tensor(3.0)))

@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_int_extremes(op):
  i32 = np.array([-1234, 0, 1234, 2**31 - 1, -2**31], np.int32)
  for other in (2**31 - 1, -2**31):
    check(lambda x: getattr(x, op)(other), i32, tfn=lambda x: getattr(torch, op)(x, torch.tensor(other, dtype=torch.int32)), grad=False)
  assert dtypes.int32.max == 2**31 - 1 and dtypes.int32.min == -2**31 and dtypes.uint8.max == 255 and dtypes.float32.min == -math.inf

@pytest.mark.parametrize("cmp", ["lt", "le", "gt", "ge", "eq", "ne"])
def test_comparisons_have_zero_gradient(cmp):
  # torch can't differentiate a bool output: compare the gradient of (x<y)*x + ..., whose cmp part contributes nothing
  a, b = np.array([1., 2., 3.], np.float32), np.array([2., 2., 1.], np.float32)
  op = {"lt": "__lt__", "le": "__le__", "gt": "__gt__", "ge": "__ge__", "eq": "__eq__", "ne": "__ne__"}[cmp]
  check(lambda x, y: getattr(x, op)(y).float() * x + y, a, b, tfn=lambda x, y: getattr(x, op)(y).float() * x + y)
  x = Tensor(a); y = Tensor(b)
  gx, gy = getattr(x, op)(y).float().sum().gradient(x, y)   # only reached through the comparison: zeros, as tinygrad
  np.testing.assert_array_equal(gx.numpy(), 0); np.testing.assert_array_equal(gy.numpy(), 0)

def test_comparison_backward_fills_zero_grads():
  x = Tensor([1.0, 2.0, 3.0]); y = Tensor([2.0, 2.0, 1.0])
  (x < y).float().sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), 0); np.testing.assert_array_equal(y.grad.numpy(), 0)

def test_copysign():
  mags = np.array([0.0, -0.0, 1.5, -2.0, 3.0, -4.0, 7.0, 1.0], np.float32)
  signs = np.array([1.0, -1.0, -0.0, 0.0, -3.0, 2.0, -math.inf, math.nan], np.float32)
  check(lambda a, b: a.copysign(b), mags, signs, tfn=torch.copysign)
  check(lambda a, b: a.copysign(b), SPECIAL, SPECIAL[::-1].copy(), tfn=torch.copysign, grad=False)

@pytest.mark.parametrize("name", ["sigmoid", "tanh", "silu", "softplus", "quick_gelu", "gelu_tanh", "gelu_none", "logsigmoid", "elu", "mish"])
def test_activations_at_extremes(name):
  tc = {"quick_gelu": lambda x: x.quick_gelu(), "gelu_tanh": lambda x: x.gelu(approximate="tanh"), "gelu_none": lambda x: x.gelu(approximate="none")}
  th = {"quick_gelu": lambda x: x * torch.sigmoid(1.702 * x), "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "gelu_none": lambda x: F.gelu(x, approximate="none"), "tanh": torch.tanh, "sigmoid": torch.sigmoid}
  check(tc.get(name, lambda x: getattr(x, name)()), EXTREME, tfn=th.get(name, getattr(F, name, None)), atol=1e-4, grad_atol=1e-4)

@pytest.mark.parametrize("name", ["sigmoid", "tanh"])
def test_saturating_activations_at_inf_and_nan(name):
  check(lambda x: getattr(x, name)(), SPECIAL, tfn=getattr(torch, name))

def test_gelu_rejects_unknown_approximation():
  with pytest.raises(ValueError, match="approximate"): Tensor([1.0]).gelu(approximate="erf")

@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp", "logcumsumexp"])
@pytest.mark.parametrize("case", ["wide", "inf", "neg_inf_row", "far_apart"])
def test_log_sum_exp_family(name, case):
  x = {"wide": np.array([[-1e3, 0.0, 1e3], [300.0, 299.0, -300.0]], np.float32),
       "inf": np.array([[math.inf, 0.0, 1.0], [1.0, 2.0, 3.0]], np.float32),
       "neg_inf_row": np.array([[-math.inf, -math.inf, -math.inf], [-math.inf, 0.0, 1.0]], np.float32),
       "far_apart": np.array([[0.0, 100.0, 0.0], [-100.0, 0.0, 100.0]], np.float32)}[case]
  grad = case in ("wide", "far_apart")   # torch's gradients through +-inf are nan or 0 by accident of formula
  tfn = {"softmax": lambda t: torch.softmax(t, 1), "log_softmax": lambda t: torch.log_softmax(t, 1), "logsumexp": lambda t: torch.logsumexp(t, 1),
         "logcumsumexp": lambda t: torch.logcumsumexp(t, 1)}[name]
  check(lambda t: getattr(t, name)(1), x, tfn=tfn, grad=grad, atol=1e-4)

@pytest.mark.parametrize("p,dim", [(2, 1), (2, 0), (1, 1), (3, 0), (0, 1), (-1, 1), (math.inf, 1), (-math.inf, 0)])
def test_normalize(p, dim):
  x = np.random.default_rng(3).standard_normal((5, 6)).astype(np.float32)
  x[0, :2] = 0.0
  check(lambda t: t.normalize(p=p, dim=dim), x, tfn=lambda t: F.normalize(t, p=p, dim=dim), atol=1e-5, grad_atol=1e-4)

def test_cross_entropy_class_indices_and_bad_target_shape():
  rng = np.random.default_rng(5)
  x, y = rng.standard_normal((8, 10)).astype(np.float32), rng.integers(0, 10, (8,)).astype(np.int64)
  check(lambda a: a.cross_entropy(Tensor(y)), x, tfn=lambda a: F.cross_entropy(a, torch.tensor(y)))
  with pytest.raises(RuntimeError, match="must match"): Tensor(x).cross_entropy(Tensor(rng.standard_normal((8, 1)).astype(np.float32)))
  with pytest.raises(ValueError, match="must match"): Tensor(x).cross_entropy(Tensor(rng.standard_normal((8, 1)).astype(np.float32)))
