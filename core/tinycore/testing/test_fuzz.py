"""The differential fuzzer (tinycore.testing.fuzz) on the kit's device, and the regression tests of the bugs it found.

TINYCORE_FUZZ_EXAMPLES sets how many graphs the default run tries (derandomized, so CI is repeatable); the `slow`
variant (`-m slow`) tries TINYCORE_FUZZ_SLOW_EXAMPLES fresh random graphs, for nightly runs."""
import numpy as np
import pytest
from tinycore import Device, Tensor, dtypes
from tinycore.testing import fuzz
from tinycore.testing.helpers import check
from tinycore.helpers import env_value

def _fuzz(examples: int, derandomize: bool, seed: int | None = None):
  from hypothesis import HealthCheck, given, settings
  from hypothesis import seed as with_seed
  @settings(max_examples=examples, deadline=None, derandomize=derandomize, database=None, print_blob=True,
            suppress_health_check=list(HealthCheck))
  @given(fuzz.graphs(fuzz.device_dtypes(Device.DEFAULT), specials=Device[Device.DEFAULT].renderer.ieee_specials))
  def run(graph): fuzz.check_graph(graph)
  (with_seed(seed)(run) if seed is not None else run)()

def test_fuzz_graphs(): _fuzz(env_value("TINYCORE_FUZZ_EXAMPLES", 80), derandomize=True)

@pytest.mark.slow
def test_fuzz_graphs_long():
  """Fresh random graphs each run, or, with TINYCORE_FUZZ_SEED set (CI's slow lane), the same graphs every run: a
  gate should not fail at random on a bug nobody changed; the nightly run without a seed is where new bugs surface."""
  seed = env_value("TINYCORE_FUZZ_SEED", -1)
  _fuzz(env_value("TINYCORE_FUZZ_SLOW_EXAMPLES", 2000), derandomize=False, seed=seed if seed >= 0 else None)

def test_unclaimed_dtypes_say_so():
  """A dtype the device's renderer doesn't claim (the fuzzer never draws it) must fail with an error naming it,
  not compute something."""
  claimed = set(fuzz.device_dtypes(Device.DEFAULT))
  for dt in fuzz.ALL_DTYPES:
    if dt in claimed: continue
    with pytest.raises(Exception, match=dt.name):
      (Tensor(np.arange(5, dtype=np.float32), dtype=dt) + 1).realize()

# ---- the regression: compares over every size 1..300 (straddling every vector width) into bool buffers
CMP_SOURCES = [dtypes.float32, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.float16, dtypes.bfloat16]

STRADDLE = sorted({*range(1, 10), *(w + d for w in (16, 32, 64, 128, 256) for d in (-1, 0, 1)), 300})
CMPS = {">": lambda a, c: a > c, "<": lambda a, c: a < c, "==": lambda a, c: a == c, "!=": lambda a, c: a != c, ">=": lambda a, c: a >= c}

def _compare_sizes(dt, sizes, ops):
  if dt not in fuzz.device_dtypes(Device.DEFAULT): pytest.skip(f"{Device.DEFAULT} does not claim {dt.name}")
  r = np.random.default_rng(7)
  for n in sizes:
    x = fuzz.fround(r.random(n) * 2, dt) if dtypes.is_float(dt) else r.integers(0, 3, n).astype(np.float64)   # exact in dt
    t, c = Tensor(x.astype(np.float32), dtype=dt), 0.5 if dtypes.is_float(dt) else 1
    for op in ops:
      g = op(t, c).numpy()
      assert g.dtype == np.bool_ and g.shape == (n,), f"{dt.name} n={n}: got {g.dtype} {g.shape}"
      np.testing.assert_array_equal(g, op(x, c), err_msg=f"{dt.name} compare, n={n}")

def test_float_greater_every_size():
  """The issue's case: (Tensor(x) > 0.5) for float32 x of every size 1..300 (a vector compare once stored 4-byte lanes
  into the 1-byte bool buffer, past its end)."""
  _compare_sizes(dtypes.float32, range(1, 301), [lambda a, c: a > c])

@pytest.mark.parametrize("dt", CMP_SOURCES, ids=lambda d: d.name)
def test_compare_sizes_straddling_vector_widths(dt):
  """Compares from each source dtype into bool at sizes on both sides of each vector width (every compare for
  float32, an ordering and an equality for the others: each size is its own kernel, and compiles add up)."""
  _compare_sizes(dt, STRADDLE, list(CMPS.values()) if dt == dtypes.float32 else [CMPS[">"], CMPS["=="]])

def test_compare_of_two_tensors_every_size():
  r = np.random.default_rng(8)
  for n in range(1, 300, 7):
    a, b = r.standard_normal(n).astype(np.float32), r.standard_normal(n).astype(np.float32)
    check(Tensor(a) < Tensor(b), a < b); check((Tensor(a) > 0).where(Tensor(a), Tensor(b)), np.where(a > 0, a, b))

# ---- regressions found by the fuzzer
def test_relu_keeps_unsigned_dtype():
  """where(cond, 0, x) once promoted an unsigned x with the int32 scalar to int64 (relu of a uint32 came back int64)."""
  x = np.array([3, 0, 7], np.uint32)
  check(Tensor(x).relu(), x)
  check((Tensor(x) > 2).where(Tensor(x), 1), np.where(x > 2, x, 1).astype(np.uint32))
  check((Tensor(x.astype(np.uint8)) > 2).where(0, Tensor(x.astype(np.uint8))), np.where(x > 2, 0, x).astype(np.uint8))

def test_greater_equal_with_nan_is_false():
  """a >= b was not(a < b), which is True for a NaN; numpy and torch say False (and the same for <=)."""
  x = np.array([np.nan, 1, 2, -np.inf, np.inf, 0], np.float32)
  for c in (1.0, np.nan):
    check(Tensor(x) >= c, x >= c); check(Tensor(x) <= c, x <= c); check(c <= Tensor(x), c <= x); check(c >= Tensor(x), c >= x)
  check(Tensor(x) >= Tensor(x[::-1].copy()), x >= x[::-1])

def test_pad_of_empty():
  """Padding a 0-element tensor reads an empty input buffer; the emulator once failed to view its 1-byte allocation as int16."""
  for dt in (np.int16, np.float32, np.int64):
    if dtypes.from_np(dt) not in fuzz.device_dtypes(Device.DEFAULT): continue
    check(Tensor(np.zeros((0,), dt)).pad(((1, 2),)), np.zeros(3, dt))
    check(Tensor(np.zeros((2, 0), dt)).pad(((0, 0), (1, 0))), np.zeros((2, 1), dt))

def test_nan_casts_to_true_and_is_unequal():
  """NaN is nonzero (casts to True) and != everything, itself included; WGSL once rendered both as an ordered !=, false for NaN."""
  for dt in (np.float32, np.float16):
    if dtypes.from_np(dt) not in fuzz.device_dtypes(Device.DEFAULT): continue
    x = np.array([np.nan, 0, -0.0, 1, np.inf], dt)
    with np.errstate(invalid="ignore"):
      check(Tensor(x).cast(dtypes.bool), x.astype(bool)); check((Tensor(x) * 1).cast(dtypes.bool), x.astype(bool))
    check(Tensor(x) != 1, x != 1); check(Tensor(x) != Tensor(x[::-1].copy()), x != x[::-1]); check(Tensor(x).bool().logical_not(), ~x.astype(bool))

def test_scalar_constants_round_to_their_dtype():
  """A 0-d tensor (a CONST) of bfloat16/fp8 kept its unrounded python float, so a cast folded at compile time saw 1.0957
  where the fp8e4m3 value is 1.125."""
  for dt in (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.bfloat16, dtypes.float16):
    if dt not in fuzz.device_dtypes(Device.DEFAULT): continue
    want = fuzz.fround(np.array([1.0956935, -3.3]), dt)
    for i, v in enumerate((1.0956935, -3.3)):
      check(Tensor(np.array(v, np.float32), dtype=dt).cast(dtypes.float32), np.float32(want[i]))
      check(Tensor(v, dtype=dt).cast(dtypes.float32), np.float32(want[i]))

def test_value_ranges_respect_wraparound():
  """min of a uint is max - max(max - x), rewritten as x*4294967295 + 4294967295 (mod 2**32, fine); its value range
  ignored the wrap (>= 4294967295), so maximum(that, 1) folded to the left side and min(...).maximum(1) gave 0."""
  a = np.array([3, 0, 5], np.uint32)
  check(Tensor(a).min().maximum(1), np.uint32(1)); check(Tensor(a.astype(np.uint8)).min().maximum(1), np.uint8(1))
  check((Tensor(a) * 4294967295).maximum(1), np.maximum(a * np.uint32(4294967295), 1))
  b = np.array([100, -100, 7], np.int8)
  check((Tensor(b) * 3).maximum(-100), np.maximum(b * np.int8(3), -100).astype(np.int8))

def test_int_cast_of_a_range_wraps():
  """The fuzzer's EMU+AMD find (CPU agrees): an int cast's value range clamped instead of wrapping, so (-bool).cast(uint8),
  with a range of [-1, 0], had [0, 0] and folded to a constant 0 where numpy has 255."""
  b = np.array([True, False, True])
  for src, dst in ((np.int8, np.uint8), (np.int8, np.uint16), (np.int16, np.uint8), (np.int32, np.uint32), (np.int16, np.int8)):
    if not {dtypes.from_np(src), dtypes.from_np(dst)} <= set(fuzz.device_dtypes(Device.DEFAULT)): continue
    s = -b.astype(src)
    check((Tensor(b).cast(dtypes.from_np(src)) * -1).cast(dtypes.from_np(dst)), s.astype(dst))
    check((Tensor(np.zeros(3, src)) - Tensor(b)).cast(dtypes.from_np(dst)), s.astype(dst))
    if src != np.int8:   # [200, 300] leaves int8 and uint8: {-56, 44} and {200, 44}
      check((Tensor(b).cast(dtypes.from_np(src)) * 100 + 200).cast(dtypes.from_np(dst)), (b.astype(src) * 100 + 200).astype(dst))

def test_zero_times_inf_is_nan():
  """The fuzzer's WEBGPU find: a folded -0.0 times a loaded -inf came back 0. A device that keeps IEEE specials must give
  nan; one whose language allows finite-math assumptions declares Renderer.ieee_specials = False (and the fuzzer then
  feeds it finite inputs only)."""
  if not Device[Device.DEFAULT].renderer.ieee_specials: pytest.skip(f"{Device.DEFAULT} declares finite math (Renderer.ieee_specials)")
  z = Tensor.zeros(0, 1, 1).sum(0).neg()   # (1, 1): a constant -0.0 once the empty sum folds
  w = Tensor(np.array([[-np.inf, 1.0, 2.0]], np.float32)).realize()
  out = (z @ w).numpy()
  assert np.isnan(out[0, 0]) and (out[0, 1:] == 0).all(), out

def test_abs_of_negative_zero_is_positive_zero():
  """The fuzzer's EMU+METAL find: abs(-0.0) stayed -0.0 (where(x < 0, -x, x)), so 1/abs(x) was -inf."""
  x = np.array([-0.0, 0.0, -1.5, 2.0, -np.inf, np.nan], np.float32)
  for dt in (d for d in (dtypes.float32, dtypes.float16, dtypes.bfloat16) if d in fuzz.device_dtypes(Device.DEFAULT)):
    got = Tensor(x).cast(dt).abs().cast(dtypes.float32).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.abs(x)), err_msg=str(dt))
    np.testing.assert_array_equal(got, np.abs(x), err_msg=str(dt))

def test_fp8_keeps_the_sign_of_zero():
  """+0.0 cast to fp8 came back -0.0 (the nearest-code search tied 0x00 with 0x80 and both are even): fp8 @ bool gave
  -0.0 and 1/x flipped to -inf. The fuzzer's find on EMU+METAL/CPU."""
  x = np.array([0.0, -0.0, 1.5, -1.5, 1e-12, -1e-12], np.float32)
  for dt in (d for d in (dtypes.fp8e4m3, dtypes.fp8e5m2) if d in fuzz.device_dtypes(Device.DEFAULT)):
    got = Tensor(x).cast(dt).cast(dtypes.float32).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(x), err_msg=str(dt))
    np.testing.assert_array_equal(got, fuzz.fround(x, dt), err_msg=str(dt))

def test_reference_keeps_unknown_through_unary_ops():
  """The reference itself: reciprocal/sqrt/log of a NaN value whose bound was already unknown (a where picking between
  NaN and a number on an unknown condition) came out as a known NaN, and flagged a correct device."""
  x = fuzz.Ref(np.array([np.nan, 2.0, np.nan]), np.array([np.inf, 0.0, 0.0]), dtypes.float32)
  for name in ("reciprocal", "sqrt", "log", "exp", "sin", "neg"):
    r = fuzz.ref_unary(name, x)
    assert np.isinf(r.err[0]) and np.isfinite(r.err[1]) and np.isfinite(r.err[2]), (name, r.err)

def test_reference_keeps_unknown_through_binary_ops_and_bool_casts():
  """The reference itself: exp(32) in half may overflow (unknown); times a False mask it came out a known NaN (so cast to
  bool a known True), but the device keeps float intermediates unrounded, holds 7.9e13, and gets 0 -> False."""
  x = fuzz.Ref(np.array([np.inf, 3.0]), np.array([np.inf, 0.0]), dtypes.float16)
  zero = fuzz.Ref(np.array([0.0, 0.0]), np.array([0.0, 0.0]), dtypes.float16)
  for name in ("mul", "add", "maximum", "div"):
    r = fuzz.ref_binary(name, x, zero) if name != "div" else fuzz.ref_binary(name, zero, x)
    assert np.isinf(r.err[0]) and np.isfinite(r.err[1]), (name, r.err)
  nan = fuzz.Ref(np.array([np.nan, np.nan]), np.array([np.inf, 0.0]), dtypes.float32)
  b = fuzz.ref_cast(nan, dtypes.bool)
  assert np.isinf(b.err[0]) and b.err[1] == 0 and b.val[1]

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.int64, dtypes.float32], ids=lambda d: d.name)
def test_negative_constant_after_a_minus(dt):
  """The fuzzer's case: a 0-d constant -3 // x renders x == -1 ? -(-3) : ...; the literal written bare gave "--3", which C
  lexes as a decrement and refused to compile. Also a minus before a negative constant in a subtraction and a negation."""
  if dt not in fuzz.device_dtypes(Device.DEFAULT): pytest.skip(f"{Device.DEFAULT} does not claim {dt.name}")
  x = np.array([[2], [-1], [1], [5], [-4]])
  got = (Tensor(np.int8(-3), dtype=dtypes.int8) // Tensor(x, dtype=dt)).numpy().ravel()
  np.testing.assert_array_equal(got, np.floor_divide(-3, x).ravel())
  np.testing.assert_array_equal((-(Tensor(np.int8(-3), dtype=dtypes.int8).cast(dt)) - Tensor(x, dtype=dt)).numpy(), 3 - x)

def test_reference_unknown_where_partial_products_or_sums_overflow():
  """The reference itself (EMU+NV's find, CPU agrees): a bfloat16 prod of 39 numbers up to 50 with one 0 is 0 in float64,
  but the device's running product reaches inf before the 0 and gives NaN. Any partial product/sum that may overflow
  leaves the result unknown; one that can't keeps its checks."""
  col = np.array([42, -11, -20, 27, -11, -43, -11, -19, 30, 40, 13, -15, 29, 48, -35, -36, 23, 40, 47, 28, -9, -48, -9, 45,
                  -7, 14, 38, 50, 41, 3, -18, -42, 23, 43, 0, 19, 49, 27, 50], np.float64)
  x = fuzz.Ref(np.stack([col, np.minimum(np.abs(col), 2.0)]), np.zeros((2, col.size)), dtypes.bfloat16)
  r = fuzz.ref_reduce("prod", (1,), False, x)
  assert np.isinf(r.err[0]) and np.isfinite(r.err[1]) and r.val[1] == 0, (r.val, r.err)
  h = fuzz.Ref(np.array([[60000.0, 60000.0, -60000.0], [1.0, 2.0, -3.0]]), np.zeros((2, 3)), dtypes.float16)
  for fn in ("sum", "mean"):
    r = fuzz.ref_reduce(fn, (1,), False, h)
    assert np.isinf(r.err[0]) and np.isfinite(r.err[1]), (fn, r.err)
  m = fuzz.ref_matmul(fuzz.Ref(h.val[:, None, :], np.zeros((2, 1, 3)), dtypes.float16), fuzz.Ref(np.ones((3, 1)), np.zeros((3, 1)), dtypes.float16))
  assert np.isinf(m.err[0, 0, 0]) and np.isfinite(m.err[1, 0, 0]), m.err
