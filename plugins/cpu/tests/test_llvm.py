"""DEV=CPU:LLVM: every result is checked against numpy and, where a C compiler exists, against DEV=CPU:C bit for bit
(or within a few ulps where the two compilers may legitimately round differently)."""
import math, warnings
import numpy as np
import pytest

pytest.importorskip("llvmlite")
from tinycore import Tensor, dtypes
from tinycore.device import Device
from tinycore.helpers import Context
from tinycore.compiler import CompileError
from tinycore_cpu.compiler_c import find_cc

HAS_C = find_cc() is not None
rng = np.random.default_rng(0)

def run(dev: str, fn, *arrs):
  with Context(DEV=dev): return fn(*[Tensor(a) for a in arrs]).numpy()

def run_c(fn, *arrs):
  try: return run("CPU:C", fn, *arrs)
  except CompileError as e:   # the C renderer's problem, not LLVM's: say so and compare with numpy only
    warnings.warn(f"CPU:C can't compile this kernel, comparing LLVM with numpy only: {(e.log or '').splitlines()[:1]}")
    return None

def close(got, want, atol, rtol, what):
  assert got.shape == want.shape and got.dtype == want.dtype, f"{what}: {got.shape} {got.dtype} != {want.shape} {want.dtype}"
  if got.dtype.kind in "biu": np.testing.assert_array_equal(got, want, err_msg=what)
  else: np.testing.assert_allclose(got, want, atol=atol, rtol=rtol, equal_nan=True, err_msg=what)

def check(fn, ref, *arrs, atol=1e-6, rtol=1e-5, c_atol=None, c_rtol=None, vs_c=True):
  got = run("CPU:LLVM", fn, *arrs)
  if ref is not None:
    with np.errstate(all="ignore"): want = np.asarray(ref(*arrs))
    close(got, want.astype(got.dtype), atol, rtol, "LLVM vs numpy")   # dtypes are checked against C below
  if HAS_C and vs_c and (c := run_c(fn, *arrs)) is not None:
    close(got, c, c_atol if c_atol is not None else atol, c_rtol if c_rtol is not None else rtol, "LLVM vs C")
  return got

def f32(*shape, lo=-3, hi=3): return rng.uniform(lo, hi, shape).astype(np.float32)
def bf16(x: np.ndarray) -> np.ndarray:
  """numpy reference for bfloat16 rounding (nearest even), back as float32."""
  u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
  r = ((u + 0x7fff + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
  return np.where(np.isnan(x), np.float32(np.nan), r)

def test_uses_llvm():
  with Context(DEV="CPU:LLVM"): dev = Device[Device.DEFAULT]
  assert dev.renderer.name == "LLVM" and type(dev.renderer).__name__ == "LLVMRenderer"
  src = dev.renderer.render("k", [])
  assert "define void @\"k\"" in src and "%core_start" in src

# ---- elementwise, float32
@pytest.mark.parametrize("name,fn,ref", [
  ("add", lambda a, b: a + b, np.add), ("sub", lambda a, b: a - b, np.subtract), ("mul", lambda a, b: a * b, np.multiply),
  ("div", lambda a, b: a / b, np.divide), ("max", lambda a, b: a.maximum(b), np.maximum), ("min", lambda a, b: a.minimum(b), np.minimum),
  ("lt", lambda a, b: a < b, np.less), ("eq", lambda a, b: a == b, np.equal), ("ne", lambda a, b: a != b, np.not_equal),
  ("where", lambda a, b: (a > b).where(a, b * 2), lambda a, b: np.where(a > b, a, b * 2)),
  ("chain", lambda a, b: ((a * b + a) - b / 3).relu(), lambda a, b: np.maximum((a * b + a) - b / 3, 0))])
def test_binary_f32(name, fn, ref): check(fn, ref, f32(37, 19), f32(37, 19))

@pytest.mark.parametrize("name,fn,ref,lo,hi", [
  ("exp", Tensor.exp, np.exp, -5, 5), ("log", Tensor.log, np.log, 0.01, 10), ("sqrt", Tensor.sqrt, np.sqrt, 0, 10),
  ("sin", Tensor.sin, np.sin, -10, 10),
  ("cos", Tensor.cos, np.cos, -10, 10), ("neg", Tensor.neg, np.negative, -3, 3), ("recip", Tensor.reciprocal, np.reciprocal, 0.1, 3),
  ("trunc", Tensor.trunc, np.trunc, -9, 9), ("floor", Tensor.floor, np.floor, -9, 9), ("abs", Tensor.abs, np.abs, -3, 3),
  ("sigmoid", Tensor.sigmoid, lambda x: 1 / (1 + np.exp(-x)), -8, 8), ("exp2", Tensor.exp2, np.exp2, -8, 8), ("log2", Tensor.log2, np.log2, 0.01, 9)])
def test_unary_f32(name, fn, ref, lo, hi): check(fn, ref, f32(1000, lo=lo, hi=hi), atol=1e-5, rtol=1e-5)

def test_float64():
  check(lambda a, b: (a * b).exp() + a.sqrt(), lambda a, b: np.exp(a * b) + np.sqrt(a), f32(64, lo=0, hi=2).astype(np.float64),
        f32(64).astype(np.float64), rtol=1e-12)

# ---- integer dtypes: wrap-around, signedness of compare/shift/max/div
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
def ints(dt, n=200):
  info = np.iinfo(dt)
  return np.concatenate([rng.integers(info.min, info.max, n - 6, dtype=dt, endpoint=True), np.array([info.min, info.max, 0, 1, 2, info.max - 1], dt)])

@pytest.mark.parametrize("dt", INTS, ids=lambda d: np.dtype(d).name)
def test_int_arith(dt):
  a, b = ints(dt), ints(dt)[::-1].copy()
  with np.errstate(over="ignore"):
    check(lambda x, y: x + y, np.add, a, b); check(lambda x, y: x * y, np.multiply, a, b); check(lambda x, y: x - y, np.subtract, a, b)
  check(lambda x, y: x.maximum(y), np.maximum, a, b); check(lambda x, y: x < y, np.less, a, b)
  check(lambda x, y: x ^ y, np.bitwise_xor, a, b); check(lambda x, y: x & y, np.bitwise_and, a, b); check(lambda x, y: x | y, np.bitwise_or, a, b)
  check(lambda x: x >> 3, lambda x: x >> 3, a); check(lambda x: x << 2, lambda x: (x << 2).astype(dt), a)

def c_div(a, b):
  """C (truncating) division and remainder with x/0 = x%0 = 0, in python ints, wrapped to the dtype."""
  q = np.array([0 if y == 0 else abs(int(x)) // abs(int(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a, b)], dtype=object)
  r = np.array([0 if y == 0 else int(x) - int(qq) * int(y) for x, y, qq in zip(a, b, q)], dtype=object)
  bits = a.dtype.itemsize * 8
  wrap = lambda v: np.array([(int(x) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1)) if a.dtype.kind == "i" else int(x) % (1 << bits)
                             for x in v]).astype(a.dtype)
  return wrap(q), wrap(r)

@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int32, np.uint32, np.int64], ids=lambda d: np.dtype(d).name)
def test_int_div_by_zero(dt):
  # tensor divisors (not constants) with zeros: x/0 traps on x86, here it is defined as 0 (x%0 too)
  a = np.array([7, -7, 7, -7, 0, 5, 13, 100, -100, 1], dt) if np.iinfo(dt).min < 0 else np.array([7, 9, 99, 0, 5, 13, 1, 2, 3, 4], dt)
  b = np.array([2, 2, -2, 0, 0, 0, 4, 7, -7, 0], dt) if np.iinfo(dt).min < 0 else np.array([2, 0, 7, 0, 0, 4, 1, 2, 0, 3], dt)
  q, r = c_div(a, b)
  check(lambda x, y: x.idiv(y), lambda x, y: q, a, b)
  check(lambda x, y: x - x.idiv(y) * y, lambda x, y: (a.astype(np.int64) - q.astype(np.int64) * b).astype(dt), a, b)

@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64], ids=lambda d: np.dtype(d).name)
def test_int_div_min_by_minus_one(dt):
  # MIN/-1 overflows (and traps on x86 for 32/64-bit): it wraps to MIN. Not compared with C, whose plain `/` traps here.
  mn = np.iinfo(dt).min
  a, b = np.array([mn, mn, mn + 1, 9], dt), np.array([-1, 1, -1, -1], dt)
  q, _ = c_div(a, b)
  check(lambda x, y: x.idiv(y), lambda x, y: q, a, b, vs_c=False)

def test_int_const_div():
  a = ints(np.int32)
  check(lambda x: x.idiv(7), lambda x: c_div(x, np.full_like(x, 7))[0], a)
  check(lambda x: x.idiv(0), lambda x: np.zeros_like(x), a)

# ---- half, bfloat16, fp8, bool
def test_half():
  a, b = f32(300).astype(np.float16), f32(300).astype(np.float16)
  check(lambda x, y: x * y + x, lambda x, y: x * y + x, a, b, atol=1e-3, rtol=1e-3)
  # exp is exp2(x*log2(e)) in half: rounding x*log2(e) to half (ulp 2^-8 near 4) moves exp by up to ~0.3%
  check(lambda x: x.exp(), np.exp, a, atol=5e-3, rtol=5e-3)
  check(lambda x: x.sqrt(), np.sqrt, np.abs(a), atol=1e-3, rtol=1e-3)
  check(lambda x: x.float() * 3, lambda x: x.astype(np.float32) * 3, a)
  check(lambda x: x.half(), lambda x: x.astype(np.float16), f32(300) * 1000)                      # float -> half, incl. overflow to inf
  check(lambda x: x.half(), lambda x: x.astype(np.float16), (f32(300) * 1e4).astype(np.float64))   # double -> half (a libcall on x86)
  check(lambda x: x.sum(), lambda x: x.astype(np.float32).sum().astype(np.float16), a, atol=5e-2, rtol=1e-2)

def test_bfloat16():
  a, b = f32(500), f32(500)
  got = check(lambda x: x.bfloat16().float(), bf16, a)
  assert np.array_equal(got, bf16(a))
  # like the C renderer, bf16 values live in float registers and are rounded where they are stored or cast: within a fused
  # kernel an intermediate may keep more bits than per-op rounding (numpy reference) would, so numpy gets 1 bf16 ulp
  check(lambda x, y: (x.bfloat16() * y.bfloat16()).float(), lambda x, y: bf16(bf16(x) * bf16(y)), a, b, atol=0, rtol=2**-8, c_rtol=0)
  check(lambda x, y: (x.bfloat16() + y.bfloat16()).exp().float(), lambda x, y: bf16(np.exp(bf16(x) + bf16(y))), a, b, rtol=2**-7, c_rtol=1e-6)
  check(lambda x: x.bfloat16().sum().float(), None, a, rtol=1e-2)
  spec = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.3895314e38], np.float32)
  check(lambda x: x.bfloat16().float(), bf16, spec)
  bits = np.array([1.0, -2.0, 0.5, 1e-3, np.inf], np.float32)
  check(lambda x: x.bfloat16().bitcast(dtypes.uint16), lambda x: (bf16(x).view(np.uint32) >> 16).astype(np.uint16), bits)   # the stored bits
  check(lambda x: x.bitcast(dtypes.bfloat16).float(), lambda x: (x.astype(np.uint32) << 16).view(np.float32),
        np.array([0x3f80, 0xc000, 0x7f80, 0x1], np.uint16))

@pytest.mark.parametrize("dt", ["fp8e4m3", "fp8e5m2"])
def test_fp8(dt):
  fp8 = getattr(dtypes, dt)
  vals = np.concatenate([f32(400, lo=-20, hi=20), f32(100, lo=-0.02, hi=0.02),
                         np.array([1.0, 0.1, 448, 500, 57344, 1e6, -1e6, np.inf, -np.inf, np.nan, 0, 2**-9, 2**-10, 2**-16, 2**-17], np.float32)])
  # vs C without +-inf: C's nearest-value search turns +inf into -448 for e4m3 (every distance is inf); here it saturates to 448
  fin_vals = vals[np.isfinite(vals) | np.isnan(vals)]
  check(lambda x: x.cast(fp8).float(), None, fin_vals)
  got = check(lambda x: x.cast(fp8).float(), None, vals, vs_c=False)
  fin = 448.0 if dt == "fp8e4m3" else 57344.0
  t = got[500:]   # 1.0, 0.1, 448, 500, 57344, 1e6, -1e6, inf, -inf, nan, 0, 2^-9, 2^-10, 2^-16, 2^-17
  assert t[0] == 1.0 and t[1] == (0.1015625 if dt == "fp8e4m3" else 0.09375) and t[5] == fin and t[6] == -fin and np.isnan(t[9]) and t[10] == 0
  assert (t[7], t[8]) == ((fin, -fin) if dt == "fp8e4m3" else (np.inf, -np.inf))   # e4m3fn has no inf: saturate
  assert (t[11], t[12]) == ((2**-9, 0.0) if dt == "fp8e4m3" else (2**-9, 2**-10)) and (t[13], t[14]) == ((0, 0) if dt == "fp8e4m3" else (2**-16, 0))
  assert np.all(np.abs(got[:500] - vals[:500]) <= np.abs(vals[:500]) * (2 ** -4 if dt == "fp8e4m3" else 2 ** -3) + 2 ** -9)
  check(lambda x: (x.cast(fp8) * 2).float(), None, fin_vals)

def test_bool():
  a, b = rng.random(100) > 0.5, rng.random(100) > 0.3
  check(lambda x, y: x & y, np.logical_and, a, b); check(lambda x, y: x | y, np.logical_or, a, b); check(lambda x, y: x ^ y, np.logical_xor, a, b)
  check(lambda x: x.logical_not(), np.logical_not, a); check(lambda x, y: x.where(y, x), lambda x, y: np.where(x, y, x), a, b)
  check(lambda x, y: x.float() * 2 + y.int(), lambda x, y: x.astype(np.float32) * 2 + y.astype(np.int32), a, b)
  check(lambda x: x.any(), np.any, a); check(lambda x: x.all(), np.all, a); check(lambda x, y: x.eq(y), np.equal, a, b)

# ---- casts
@pytest.mark.parametrize("dt", INTS + [np.float16, np.float64, np.bool_], ids=lambda d: np.dtype(d).name)
def test_cast_from_float(dt):
  name = np.dtype(dt).name
  tdt = dtypes.from_np(np.dtype(dt)) if hasattr(dtypes, "from_np") else getattr(dtypes, {"float16": "half", "float64": "double"}.get(name, name))
  x = np.array([0.0, 1.5, -1.5, 2.9, -2.9, 100.7, 127.0, 0.2, -0.0, 42.0], np.float32)
  if np.dtype(dt).kind == "u": x = np.abs(x)
  check(lambda t: t.cast(tdt), lambda t: t.astype(dt), x)

def test_cast_between_ints_and_floats():
  a = ints(np.int32)
  check(lambda x: x.cast(dtypes.int8), lambda x: x.astype(np.int8), a); check(lambda x: x.cast(dtypes.uint16), lambda x: x.astype(np.uint16), a)
  check(lambda x: x.cast(dtypes.int64), lambda x: x.astype(np.int64), a); check(lambda x: x.cast(dtypes.uint64), lambda x: x.astype(np.uint64), a)
  check(lambda x: x.float(), lambda x: x.astype(np.float32), a); check(lambda x: x.double(), lambda x: x.astype(np.float64), a)
  u = ints(np.uint32)
  check(lambda x: x.float(), lambda x: x.astype(np.float32), u); check(lambda x: x.cast(dtypes.int64), lambda x: x.astype(np.int64), u)
  check(lambda x: x.bool(), lambda x: x.astype(bool), a)
  check(lambda x: x.bool(), lambda x: x.astype(bool), np.array([0.0, -0.0, np.nan, 1.0, -np.inf], np.float32))   # NaN is truthy
  check(lambda x: x.bitcast(dtypes.int32), lambda x: x.view(np.int32), f32(50))
  check(lambda x: x.bitcast(dtypes.float32), lambda x: x.view(np.float32), a)

# ---- NaN / inf
def test_nan_inf_propagation():
  nan, inf = np.nan, np.inf
  a = np.array([nan, 1.0, -inf, inf, nan, 0.0, -0.0, 3.0], np.float32)
  b = np.array([1.0, nan, 2.0, nan, nan, 0.0, 5.0, -inf], np.float32)
  check(lambda x, y: x.maximum(y), np.maximum, a, b); check(lambda x, y: x.minimum(y), np.minimum, a, b)
  # relu(NaN) is the frontend's choice (NaN or 0); the renderer must agree with C and be right elsewhere
  r = check(lambda x: x.relu(), None, a)
  np.testing.assert_array_equal(r[~np.isnan(a)], np.maximum(a, 0)[~np.isnan(a)])
  check(lambda x, y: x / y, np.divide, a, b); check(lambda x, y: x * y, np.multiply, a, b)
  check(lambda x: x.max(), np.max, a); check(lambda x: x.sum(), np.sum, a); check(lambda x: x[1:4].sum(), lambda x: x[1:4].sum(), a)
  z = np.array([0.0, -1.0, 1.0, 0.0, 100.0, -100.0, inf, -inf], np.float32)
  check(lambda x: x.log(), np.log, z); check(lambda x: x.sqrt(), np.sqrt, z)
  check(lambda x: x.exp(), np.exp, z); check(lambda x: x.reciprocal(), np.reciprocal, z)
  check(lambda x: x.sin(), np.sin, z[[0, 1, 2, 4, 5]])
  check(lambda x, y: x < y, np.less, a, b); check(lambda x, y: x == y, np.equal, a, b); check(lambda x, y: x != y, np.not_equal, a, b)
  check(lambda x: x.max(), np.max, np.array([1.0, np.nan, 3.0] * 50, np.float32))

# ---- reductions, matmul, movement
def test_reductions():
  a = f32(33, 65)
  check(lambda x: x.sum(), np.sum, a, rtol=1e-4)
  check(lambda x: x.sum(0), lambda x: x.sum(0), a, rtol=1e-5); check(lambda x: x.sum(1), lambda x: x.sum(1), a, rtol=1e-5)
  check(lambda x: x.max(1), lambda x: x.max(1), a); check(lambda x: x.min(0), lambda x: x.min(0), a); check(lambda x: x.mean(), np.mean, a, atol=1e-6)
  check(lambda x: x.softmax(-1), lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True), a)
  check(lambda x: (x * 2 + 1).relu().sum(), lambda x: np.maximum(x * 2 + 1, 0).sum(), f32(4096), rtol=1e-4)
  i = ints(np.int32) // 8
  check(lambda x: x.sum(), lambda x: x.sum(dtype=np.int32), i); check(lambda x: x.max(), np.max, i); check(lambda x: x.min(), np.min, ints(np.uint8))
  check(lambda x: x.prod(), lambda x: np.prod(x), f32(10, lo=0.5, hi=1.5))

@pytest.mark.parametrize("shape", [(1, 1, 1), (7, 13, 5), (64, 48, 32), (128, 256, 64)])
def test_matmul(shape):
  m, k, n = shape
  check(lambda a, b: a @ b, np.matmul, f32(m, k), f32(k, n), atol=1e-4, rtol=1e-4)

def test_matmul_int_and_half():
  a, b = rng.integers(-9, 9, (16, 24)).astype(np.int32), rng.integers(-9, 9, (24, 8)).astype(np.int32)
  check(lambda x, y: x @ y, np.matmul, a, b)
  check(lambda x, y: x @ y, lambda x, y: (x.astype(np.float32) @ y.astype(np.float32)).astype(np.float16), f32(16, 24).astype(np.float16),
        f32(24, 8).astype(np.float16), atol=5e-2, rtol=1e-2)

def test_movement():
  a = f32(6, 7, 8)
  check(lambda x: x.permute(2, 0, 1) * 2, lambda x: x.transpose(2, 0, 1) * 2, a)
  check(lambda x: x.pad(((1, 2), (0, 0), (3, 1))) + 1, lambda x: np.pad(x, ((1, 2), (0, 0), (3, 1))) + 1, a)   # gated loads
  check(lambda x: x.shrink(((1, 4), None, (2, 7))).exp(), lambda x: np.exp(x[1:4, :, 2:7]), a, atol=1e-5)
  check(lambda x: x.flip(1) - x, lambda x: x[:, ::-1] - x, a)
  check(lambda x: x[::2, 1:, ::3].sum(0), lambda x: x[::2, 1:, ::3].sum(0), a)
  check(lambda x: x.reshape(6, 56).T.contiguous() + 1, lambda x: x.reshape(6, 56).T + 1, a)
  check(lambda x, y: x + y, np.add, f32(5, 1, 4), f32(1, 3, 1))   # broadcast
  check(lambda x: x.pad(((2, 2), (2, 2), (0, 0))).sum((0, 1)), lambda x: np.pad(x, ((2, 2), (2, 2), (0, 0))).sum((0, 1)), a, rtol=1e-5)

def test_gated_loads_and_reduce_identities_per_dtype():
  b, i8, u64 = rng.random((5, 6)) > 0.5, ints(np.int8)[:30].reshape(5, 6), ints(np.uint64)[:30].reshape(5, 6)
  check(lambda x: x.pad(((1, 1), (2, 0))), lambda x: np.pad(x, ((1, 1), (2, 0))), b)      # bool: i8 in memory, i1 in registers
  check(lambda x: x.pad(((1, 1), (2, 0))).max(1), lambda x: np.pad(x, ((1, 1), (2, 0))).max(1), i8)
  check(lambda x: x.max(0), lambda x: x.max(0), u64); check(lambda x: x.min(1), lambda x: x.min(1), u64)
  check(lambda x: x.float(), lambda x: x.astype(np.float32), u64); check(lambda x: x.double(), lambda x: x.astype(np.float64), u64)
  h = f32(5, 6).astype(np.float16)
  check(lambda x: x.max(1), lambda x: x.max(1), h); check(lambda x: x.pad(((0, 0), (1, 1))).min(1), lambda x: np.pad(x, ((0, 0), (1, 1))).min(1), h)

def test_large_parallel():
  # big enough for the runtime to split the outer loop across threads (core_start/core_end)
  a, b = f32(1 << 20), f32(1 << 20)
  check(lambda x, y: (x * y + 1).relu(), lambda x, y: np.maximum(x * y + 1, 0), a, b)
  sum_max = lambda x, y: x.reshape(1024, 1024).sum(1) + y.reshape(1024, 1024).max(1)   # the same ops on Tensors and on numpy arrays
  check(sum_max, sum_max, a, b, atol=1e-4, rtol=1e-4)

def test_symbolic_variable():
  # a bound Variable becomes an i32 kernel parameter (DEFINE_VAR) used as a loop bound
  from tinycore import Variable
  v, data = Variable("n", 1, 10), np.arange(10, dtype=np.float32)
  for i in (2, 5, 9):
    check(lambda x: x.shrink(((0, v.bind(i)),)).sum(), lambda x: x[:i].sum(), data)
    check(lambda x: (x.shrink(((0, v.bind(i)),)) * 2).sum(), lambda x: (x[:i] * 2).sum(), data)

# ---- the compiler
def test_compile_error_shows_ir_and_llvm_message():
  from tinycore_cpu.compiler_llvm import LLVMCompiler
  bad = "define void @\"k\"(i32 %core_start, i32 %core_end) {\nentry:\n  %x = add i32 %nope, 1\n  ret void\n}\n"
  with pytest.raises(CompileError) as e: LLVMCompiler().compile(bad)
  msg = str(e.value)
  assert "%nope" in msg and "3 |" in msg and e.value.log

def test_compile_is_deterministic_and_loadable():
  from tinycore_cpu.compiler_llvm import LLVMCompiler
  from tinycore_cpu.runtime_llvm import LLVMProgram
  src = ("define void @\"k\"(ptr noalias %data0, i32 %core_start, i32 %core_end) nounwind {\nentry:\n"
         "  %f = call float @llvm.sin.f32(float 0x3FF0000000000000)\n  store float %f, ptr %data0\n  ret void\n}\n"
         "declare float @llvm.sin.f32(float)\n")
  c = LLVMCompiler()
  lib = c.compile(src)
  assert lib == c.compile(src) and lib[:4] == b"\x7fELF"
  out = np.zeros(1, np.float32)
  LLVMProgram("k", lib)(out.ctypes.data)
  assert out[0] == np.float32(math.sin(1.0))

def test_disposing_programs_keeps_later_ones_alive():
  """An MCJIT engine owns its target machine and frees it with itself: engines shared the compiler's cached one, so
  dropping compiled programs (a cleared runner cache) left the rest on freed memory (abort or segfault). In a
  subprocess: the failure mode kills the process."""
  import subprocess, sys, textwrap
  code = textwrap.dedent('''
    import gc, numpy as np
    from tinycore import Tensor, Context
    from tinycore.engine import run
    with Context(DEV="CPU:LLVM"):
      for i in range(6):
        x = (Tensor(np.arange(8, dtype=np.float32)) * (i + 2)).numpy()
        run._runners.clear(); gc.collect()
        y = (Tensor(np.arange(8, dtype=np.float32)) + (i + 3)).numpy()
    assert (x == np.arange(8) * 7).all() and (y == np.arange(8) + 8).all()
    print("ok")''')
  p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
  assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]
