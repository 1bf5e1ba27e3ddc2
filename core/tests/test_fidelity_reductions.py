"""Reductions, scans and matmul on shapes with a zero in every position, on 0-d tensors, and with dtype= arguments,
against torch: values and gradients (a zero-size input must still get its (empty) gradient, not 'not in the graph')."""
import numpy as np
import pytest
pytestmark = pytest.mark.needs_device
torch = pytest.importorskip("torch")
from _torch_ref import check
from tinycore import Tensor, dtypes

R = np.random.default_rng(7)
def rand(*shape): return R.standard_normal(shape).astype(np.float32)

ZERO_SHAPES = [((0,), 0), ((4, 0), 0), ((4, 0), 1), ((4, 0), (0, 1)), ((0, 3), 1), ((2, 0, 3), 1), ((2, 3, 0), 2), ((2, 3, 0), 0),
               ((1, 0, 3, 0, 5), (1, 3)), ((1, 0, 3, 0, 5), (0, 2, 4))]

@pytest.mark.parametrize("shape,axis", ZERO_SHAPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "prod"])
def test_reduce_with_zero_dims(op, shape, axis):
  ref = (lambda x: _torch_prod(x, axis)) if op == "prod" else (lambda x: getattr(torch, op)(x, axis))
  check(lambda x: getattr(x, op)(axis), rand(*shape), tfn=ref)

def _torch_prod(x, axis):
  # torch.prod takes one dim: reduce the tuple one axis at a time, highest first
  for a in sorted(axis if isinstance(axis, tuple) else (axis,), reverse=True): x = torch.prod(x, a)
  return x

@pytest.mark.parametrize("shape,axis", ZERO_SHAPES, ids=str)
@pytest.mark.parametrize("op", ["any", "all"])
def test_any_all_with_zero_dims(op, shape, axis):
  x = R.random(shape) > 0.5
  check(lambda t: getattr(t, op)(axis), x, tfn=lambda t: getattr(torch, op)(t, dim=axis), grad=False)

@pytest.mark.parametrize("correction", [0, 1, 5])
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_std_over_empty_axes_are_nan(op, correction):
  # torch: nan values (0/0), and a gradient of the right (empty) shape
  x = rand(1, 0, 3, 0, 5)
  check(lambda t: getattr(t, op)((1, 3), correction=correction), x, tfn=lambda t: getattr(torch, op)(t, (1, 3), correction=correction))

def test_std_mean_over_empty_axes():
  check(lambda x: Tensor.stack(*x.std_mean(axis=(1, 3))), rand(1, 0, 3, 0, 5), tfn=lambda x: torch.stack(torch.std_mean(x, (1, 3))))

def test_max_of_empty_axis_raises_like_torch():
  with pytest.raises(ValueError, match="empty dimension"): Tensor(rand(2, 0)).max(1)
  with pytest.raises(ValueError, match="empty dimension"): Tensor(rand(2, 0)).min(1)
  assert Tensor(rand(2, 0)).max(0).shape == (0,)   # reducing a non-empty axis of an empty tensor is fine

@pytest.mark.parametrize("shape,axis", [((2, 0, 4), 1), ((0, 3), 0), ((2, 3, 0), 2), ((2, 0, 4), 2)], ids=str)
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp"])
def test_scans_with_zero_dims(op, shape, axis):
  check(lambda x: getattr(x, op)(axis), rand(*shape), tfn=lambda x: getattr(torch, op)(x, axis))

@pytest.mark.parametrize("shape,axis", [((2, 0, 4), 1), ((0, 3), 0), ((5,), 0), ((4, 6), 1), ((3, 4, 5), -1), ((), 0)], ids=str)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_values_and_indices(op, shape, axis):
  x = rand(*shape)
  check(lambda t: getattr(t, op)(axis)[0], x, tfn=lambda t: getattr(torch, op)(t, axis).values)
  check(lambda t: getattr(t, op)(axis)[1], x, tfn=lambda t: getattr(torch, op)(t, axis).indices.int(), grad=False)

@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_ties_and_ints(op):
  # ties: torch reports the last position the running extreme was attained
  x = np.array([[1, 3, 3, 2, 3, 0, -1, -1]], np.float32)
  check(lambda t: getattr(t, op)(1)[1], x, tfn=lambda t: getattr(torch, op)(t, 1).indices.int(), grad=False)
  check(lambda t: getattr(t, op)(1)[0], x, tfn=lambda t: getattr(torch, op)(t, 1).values, grad=False)
  xi = np.array([5, -2**31, 2**31 - 1, 7, -2**31], np.int32)
  check(lambda t: getattr(t, op)(0)[0], xi, tfn=lambda t: getattr(torch, op)(t, 0).values, grad=False)
  check(lambda t: getattr(t, op)(0)[1], xi, tfn=lambda t: getattr(torch, op)(t, 0).indices.int(), grad=False)
  xu = np.array([5, 0, 255, 3, 255], np.uint8)
  check(lambda t: getattr(t, op)(0)[0], xu, tfn=lambda t: getattr(torch, op)(t, 0).values, grad=False)

@pytest.mark.parametrize("op", ["tril", "triu"])
@pytest.mark.parametrize("shape", [(5, 0, 3), (0, 4), (3, 0), (0, 0)], ids=str)
def test_tril_triu_with_zero_dims(op, shape):
  check(lambda x: getattr(x, op)(), rand(*shape), tfn=lambda x: getattr(torch, op)(x))

@pytest.mark.parametrize("a,b", [((8, 8), (8, 0)), ((0, 8), (8, 8)), ((0, 8), (8, 0)), ((8, 0), (0, 8)), ((0, 0), (0, 0)), ((0,), (0, 8)),
                                 ((0,), (0,)), ((2, 0, 3), (3, 4))], ids=str)
def test_matmul_with_zero_dims(a, b):
  # a zero-length contraction gives zeros (not garbage), a zero-size output an empty tensor; gradients either way
  check(lambda x, y: x @ y, rand(*a), rand(*b), tfn=lambda x, y: x @ y)

@pytest.mark.parametrize("axis", [0, -1, ()])
@pytest.mark.parametrize("op", ["sum", "prod", "mean", "logsumexp", "softmax", "log_softmax"])
def test_0d_tensors_take_axis_0_and_minus_1(op, axis):
  if axis == () and op in ("softmax", "log_softmax", "logsumexp"): return   # torch takes an int dim there
  tfn = {"sum": torch.sum, "prod": lambda x, a: torch.prod(x, a) if a != () else x, "mean": torch.mean, "logsumexp": torch.logsumexp,
         "softmax": torch.softmax, "log_softmax": torch.log_softmax}[op]
  if op == "mean" and axis == (): tfn = lambda x, a: x   # noqa: E731  (torch.mean(x, ()) averages everything: the same for a 0-d x)
  check(lambda x: getattr(x, op)(axis), np.array(1.5, np.float32), tfn=lambda x: tfn(x, axis))

def test_0d_bad_axis_is_index_error():
  with pytest.raises(IndexError): Tensor(1.0).sum(1)
  with pytest.raises(IndexError): Tensor(1.0).sum((1,))
  with pytest.raises(IndexError): Tensor(rand(3, 4)).sum(5)

@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "int64"])
def test_sum_prod_dtype_argument(dt):
  x = R.integers(-3, 4, (6, 5)).astype(np.int32)
  check(lambda t: t.sum(dtype=getattr(dtypes, dt)), x, tfn=lambda t: t.sum(dtype=getattr(torch, dt)), grad=False)
  check(lambda t: t.prod(1, dtype=getattr(dtypes, dt)), x, tfn=lambda t: t.prod(1, dtype=getattr(torch, dt)), grad=False)
  xf = rand(6, 5)
  if dt.startswith("float"): check(lambda t: t.sum(0, dtype=getattr(dtypes, dt)), xf, tfn=lambda t: t.sum(0, dtype=getattr(torch, dt)))

def test_unknown_dtype_name_is_type_and_attribute_error():
  for bad in ("", "float33"):
    with pytest.raises(TypeError, match="unknown dtype"): Tensor([1.0, 2.0]).sum(dtype=bad)
    with pytest.raises(AttributeError): Tensor([1.0, 2.0]).prod(dtype=bad)

def test_cummax_gradient_splits_ties():
  # documented difference (docs/compat.md): a tie shares the gradient evenly, as max() does; torch sends it all to the
  # index it reports. Without ties the two agree (test_cummax_cummin_values_and_indices).
  x = Tensor(np.array([1, 3, 3, 2], np.float32))
  g, = x.cummax(0)[0].sum().gradient(x)
  np.testing.assert_allclose(g.numpy(), [1, 2, 1, 0])

@pytest.mark.parametrize("op", ["max", "min"])
def test_int_max_min_at_the_extremes(op):
  # min of signed ints must not go through negation: -int.min wraps to itself
  for vals in ([0, -2**31], [-2**31, 0], [2**31 - 1, -2**31, 5]):
    x = np.array(vals, np.int32)
    check(lambda t: getattr(t, op)(), x, tfn=lambda t: getattr(torch, op)(t), grad=False)
  x8 = np.array([-128, 127, 0], np.int8)
  check(lambda t: getattr(t, op)(), x8, tfn=lambda t: getattr(torch, op)(t), grad=False)

# a reshape among several zero dims (the long fuzzer found (0, 0, 1, 2) -> (0, 1, 2)): the kernel's index math grouped
# equal products and ran off the end of the dims
@pytest.mark.parametrize("old,new,axis", [((0, 0, 1, 2), (0, 1, 2), 0), ((0, 3, 4), (3, 0, 4), 1), ((2, 0, 0), (0, 2, 5, 0), 2)], ids=str)
def test_reduce_after_reshape_between_zero_shapes(old, new, axis):
  x = rand(*old)
  np.testing.assert_array_equal(Tensor(x).reshape(new).sum(axis).numpy(), x.reshape(new).sum(axis))
  np.testing.assert_array_equal((Tensor(x) < 0).logical_not().reshape(new).sum(axis).numpy(), np.logical_not(x < 0).reshape(new).sum(axis))

@pytest.mark.parametrize("op", ["sum", "prod", "all"])
def test_empty_reduce_reads_nothing(op):
  """A reduce over a zero-size axis is its identity and its kernel loads nothing: the sanitizer lane caught a kernel that
  read element 0 of a zero-size bool buffer (an invalid _Bool under UBSan) before skipping its empty loop."""
  from tinycore import Device
  from tinycore.engine.schedule import create_schedule
  from tinycore.codegen import get_program
  from tinycore.uop import Ops
  x = (Tensor(rand(5, 3, 0)) > 0) if op == "all" else Tensor(rand(5, 3, 0))
  y = getattr(x, op)(axis=2)
  ast = create_schedule([y.uop])[-1].ast
  prg = get_program(ast, Device[Device.DEFAULT].renderer, None, device=Device.DEFAULT)
  assert not any(u.op is Ops.LOAD for u in prg.uops), prg.src
  np.testing.assert_array_equal(y.numpy(), getattr(np, op)(x.numpy(), axis=2))
