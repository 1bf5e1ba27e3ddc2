"""Integer semantics against torch: arange/linspace dtypes and overflow, div rounding modes, int ** int (exact, wrapping),
int ** float, shifts, isclose at inf/nan, and pow's values and gradients at 0, inf and negative bases."""
import math
import numpy as np
import pytest
torch = pytest.importorskip("torch")
from tinycore import Tensor, dtypes
from _torch_ref import check, same

pytestmark = pytest.mark.needs_device

@pytest.mark.parametrize("args,kw", [((10,), {}), ((5, 10, 3), {}), ((11, 5, -3), {}), ((5.5, 175.5, 2.5), {}), ((-50.3, -380.2, -2.25), {}),
                                     ((-128, 128), {"dtype": "int8"}), ((127, -129, -1), {"dtype": "int8"}), ((0,), {}), ((3, 3), {})], ids=str)
def test_arange(args, kw):
  tdt = {"int8": torch.int8}.get(kw.get("dtype"), torch.int32 if all(isinstance(a, int) for a in args) else None)
  same(Tensor.arange(*args, **kw), torch.arange(*args, dtype=tdt), atol=1e-4)

def test_arange_dtype_widening_and_overflow():
  assert Tensor.arange(2**31, 2**31 + 3).dtype == dtypes.int64
  np.testing.assert_array_equal(Tensor.arange(2**31, 2**31 + 3).numpy(), [2**31, 2**31 + 1, 2**31 + 2])
  for args, dt in [((2**33,), dtypes.int32), ((129,), dtypes.int8), ((-129, 128), dtypes.int8), ((128, 0, -1), dtypes.int8)]:
    with pytest.raises(OverflowError): Tensor.arange(*args, dtype=dt)

@pytest.mark.parametrize("args,dt", [((5, 10, 3), None), ((5, 10, 1), None), ((5, 10, 0), None), ((-5.5, 5.5, 10), None),
                                     ((5, 10, 20), "int32"), ((5, -5, 20), "int32")], ids=str)
def test_linspace(args, dt):
  same(Tensor.linspace(*args, dtype=dt), torch.linspace(*args, dtype=getattr(torch, dt) if dt else None), atol=1e-5)

@pytest.mark.parametrize("num", [[5, 6, 7, 0, -5, -6, -7], [5.0, 6.5, -7.25, 0.0, -0.5]], ids=["int", "float"])
@pytest.mark.parametrize("den", [-3, -1, 2, 5, -2.0, 3.0], ids=str)
@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
def test_div_rounding(num, den, mode):
  n = np.array(num, np.int32 if isinstance(num[0], int) else np.float32)
  d = np.array([den], np.int32 if isinstance(den, int) else np.float32)
  same(Tensor(n).div(Tensor(d), rounding_mode=mode), torch.tensor(n).div(torch.tensor(d), rounding_mode=mode))

@pytest.mark.parametrize("e", [0, 1, 2, 3, 7, 29], ids=str)
def test_int_pow_const_exact(e):
  x = np.array([-3, -2, 0, 2, 11, 13], np.int32)
  same(Tensor(x) ** e, torch.tensor(x) ** e)   # 13**7 > 2**24: a float32 detour would round it

def test_int_pow_float_and_int_exponents():
  x = np.array([1, 2, 3, 4], np.int32)
  for e in (0.5, 1.5, 2.0, -1.0, 0.0): same(Tensor(x) ** e, torch.tensor(x) ** e)
  same(Tensor(x) ** Tensor(np.array([3, 0, 2, 1], np.int32)), torch.tensor(x) ** torch.tensor(np.array([3, 0, 2, 1], np.int32)))
  same(2 ** Tensor(x), 2 ** torch.tensor(x))
  with pytest.raises(RuntimeError): Tensor(x) ** -2

@pytest.mark.parametrize("base", [[-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], [-math.inf, math.inf, 0.0, -0.0]], ids=["finite", "special"])
@pytest.mark.parametrize("e", [0.0, 0.3, -0.3, 1.0, 2.0, 3.0, -1.0, -2.0, 5.5], ids=str)
def test_pow_values_and_grads(base, e):
  b = np.array(base, np.float32)
  if e == 5.5 and math.isinf(base[0]):
    # documented in docs/compat.md: d/dx x**5.5 at x = -inf is +inf in torch (C's pow(-inf, 4.5)), -inf here
    t = Tensor(b)
    (g,) = (t ** e).sum().gradient(t)
    assert g.numpy()[0] == -math.inf
    b = b[1:]
  check(lambda x: x ** e, b, atol=1e-5)

def test_pow_tensor_exponent_grads():
  a = np.array([-2.0, -1.5, 0.0, 0.0, 0.0, 2.0, 3.0, math.inf], np.float32)
  b = np.array([2.0, 3.0, 0.0, 0.3, -0.3, 0.0, 1.5, 0.0], np.float32)
  check(lambda x, y: x ** y, a, b, atol=1e-5)
  check(lambda x: (-2.0) ** x, np.array([-2.0, -1, 0, 1, 2, 3], np.float32))
  check(lambda x: 0.7 ** x, np.array([-2.0, -1, 0, 1, 2, 3], np.float32))

def test_shifts():
  data = np.array([[0, 1, 2], [1 << 8, 1 << 16, (1 << 30) - 1]], np.int32)
  for k in (0, 2, 31):
    same((Tensor(data, dtype=dtypes.uint32) << k).cast(dtypes.int32), torch.tensor(data) << k)
    same((Tensor(data, dtype=dtypes.uint32) >> k).cast(dtypes.int32), torch.tensor(data) >> k)
  with pytest.raises(RuntimeError): Tensor([1.0]) << 2
  with pytest.raises(RuntimeError): Tensor([4], dtype=dtypes.uint32) >> 1.0
  with pytest.raises(RuntimeError): Tensor([4]) >> Tensor([1.0])

def test_isclose_edges():
  vals = [math.inf, -math.inf, math.nan, 0.0, 1e-9]
  a = np.array([x for x in vals for _ in vals], np.float32); b = np.array([y for _ in vals for y in vals], np.float32)
  for eq in (False, True): same(Tensor(a).isclose(Tensor(b), equal_nan=eq), torch.tensor(a).isclose(torch.tensor(b), equal_nan=eq))
  same(Tensor(a).isclose(0.0), torch.tensor(a).isclose(torch.tensor(0.0)))
