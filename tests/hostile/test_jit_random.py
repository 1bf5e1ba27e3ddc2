"""Issue 18, JIT and random state: non-Tensor arguments are guards (each set of values gets its own capture), input
Tensors must keep shape/dtype/device, and random draws inside a TinyJit advance on every replay exactly as without it."""
import math
import numpy as np, pytest
from tinycore import Tensor, TinyJit, Context, dtypes
from tinycore.engine.jit import JitError

pytestmark = pytest.mark.needs_device

def _x(n=4, seed=0): return Tensor(np.random.default_rng(seed).standard_normal(n).astype(np.float32))

# ***** non-Tensor arguments *****

def test_python_int_argument_is_not_frozen():
  # the reported bug: k=1..5 gave [1, 2, 2, 2, 2], the capture's k replayed forever
  @TinyJit
  def f(x, k): return (x * k).contiguous()
  got = [f(Tensor([1.0]), k).item() for k in range(1, 6)]
  assert got == [1.0, 2.0, 3.0, 4.0, 5.0]
  got = [f(Tensor([1.0]), k).item() for k in (3, 3, 3, 1, 5, 5)]   # replays of captured values stay right
  assert got == [3.0, 3.0, 3.0, 1.0, 5.0, 5.0]
  assert f.captured is not None and f.cnt >= 3

@pytest.mark.parametrize("vals, fn, want", [
  ((0.5, 2.0, 0.5, 2.0, -1.5), lambda x, v: x * v, lambda a, v: a * v),                                   # floats
  ((True, False, True, False), lambda x, v: x.relu() if v else -x, lambda a, v: np.maximum(a, 0) if v else -a),   # bools
  (("sum", "max", "sum", "max"), lambda x, v: getattr(x, v)(), lambda a, v: getattr(a, v)()),             # strings
  (((2, 2), (4,), (2, 2), (1, 4)), lambda x, v: x.reshape(v) * 2, lambda a, v: a.reshape(v) * 2),         # tuples
  (([1, 3], [0, 2], [1, 3]), lambda x, v: x[v[0]] + x[v[1]], lambda a, v: a[v[0]] + a[v[1]]),             # lists
  ((slice(0, 2), slice(1, 4), slice(0, 2)), lambda x, v: x[v] * 1, lambda a, v: a[v]),                    # slices (unhashable before 3.12)
  ((None, 3.0, None, 3.0), lambda x, v: x if v is None else x.clip(-v, v) * 0 + v, lambda a, v: a if v is None else a * 0 + v),
])
def test_every_kind_of_static_argument_is_a_guard(vals, fn, want):
  @TinyJit
  def f(x, v): return (fn(x, v) + 0).contiguous()
  a = np.random.default_rng(1).standard_normal(4).astype(np.float32)
  for v in vals * 2:   # each value is seen (plain), captured, then replayed
    np.testing.assert_allclose(f(Tensor(a), v).numpy(), want(a, v), rtol=1e-6, atol=1e-6)
  assert len(f._entries) == len({repr(v) for v in vals})   # equal values share one capture

def test_kwargs_and_nested_containers_are_guards():
  @TinyJit
  def f(x, *, scale, cfg): return (x * scale + cfg["shift"][0]).contiguous()
  a = np.arange(4, dtype=np.float32)
  for s, sh in [(1.0, 0.0), (2.0, 0.0), (2.0, 1.0), (1.0, 0.0), (2.0, 1.0), (2.0, 1.0), (2.0, 0.0)]:
    np.testing.assert_allclose(f(Tensor(a), scale=s, cfg={"shift": (sh,)}).numpy(), a * s + sh)

def test_keyword_names_are_part_of_the_key():
  @TinyJit
  def f(a=None, b=None): return (a * 2).contiguous() if a is not None else (b * 3).contiguous()
  for i in range(3):
    assert f(a=Tensor([1.0])).item() == 2.0
    assert f(b=Tensor([1.0])).item() == 3.0   # same Tensor count, different parameter: a different function

def test_jit_with_no_inputs_draws_fresh_numbers():
  f = TinyJit(lambda: Tensor.randn(16).contiguous())
  Tensor.manual_seed(11)
  outs = [f().numpy().copy() for _ in range(5)]
  Tensor.manual_seed(11)
  ref = [Tensor.randn(16).numpy() for _ in range(5)]
  for a, b in zip(outs, ref): np.testing.assert_array_equal(a, b)

def test_signed_zero_and_nan_are_keyed_by_value():
  @TinyJit
  def f(x, v): return (x / v).contiguous()
  one = Tensor([1.0])
  assert [f(one, v).item() for v in (0.0, -0.0, 0.0, -0.0, 0.0, -0.0)] == [math.inf, -math.inf] * 3
  g = TinyJit(lambda x, v: (x + v).contiguous())
  for _ in range(2 * TinyJit.max_captures):   # NaN != NaN must not make every call a new capture
    assert math.isnan(g(one, float("nan")).item())
  assert len(g._entries) == 1

def test_method_self_is_a_guard():
  # the jitted method is one TinyJit shared by every instance: `self` (its weights) must be part of the key
  class Scale:
    def __init__(self, w): self.w = Tensor([w]).realize()
    @TinyJit
    def __call__(self, x): return (x * self.w).contiguous()
  m2, m3 = Scale(2.0), Scale(3.0)
  for _ in range(4): assert (m2(Tensor([1.0])).item(), m3(Tensor([1.0])).item()) == (2.0, 3.0)

def test_too_many_distinct_values_is_a_clear_error():
  @TinyJit
  def f(x, k, tag="a"): return (x + k).contiguous()
  for k in range(TinyJit.max_captures): f(Tensor([0.0]), k)
  with pytest.raises(JitError, match=r"varying: argument 1\b.*Tensor or a bound Variable"): f(Tensor([0.0]), 99)
  assert f(Tensor([0.0]), 3).item() == 3.0   # the captured ones keep working
  f.reset()
  assert f(Tensor([0.0]), 99).item() == 99.0

def test_numpy_array_argument_is_refused():
  @TinyJit
  def f(x, arr): return (x + Tensor(arr)).contiguous()
  with pytest.raises(JitError, match="argument 1 is a numpy array.*Tensor"): f(Tensor([1.0]), np.ones(1, np.float32))

# ***** input Tensor guards *****

def test_input_shape_dtype_device_changes_are_clear_errors():
  @TinyJit
  def f(x): return (x * 2).contiguous()
  for i in range(3): f(_x(4, i))
  with pytest.raises(JitError, match=r"input 0 changed shape: captured with shape \(4,\) dtypes.float on CPU, now shape \(5,\)"): f(_x(5))
  with pytest.raises(JitError, match="input 0 changed dtype.*dtypes.int"): f(Tensor([1, 2, 3, 4], dtype=dtypes.int32))
  with pytest.raises(JitError, match="input 0 changed device.*on CPU:1"): f(_x(4).to("CPU:1"))
  with pytest.raises(JitError, match="captured with 1 input Tensors, now called with 2"): f(_x(4), _x(4))
  np.testing.assert_allclose(f(Tensor(np.ones(4, np.float32))).numpy(), 2.0)

# ***** random state *****

def _steps(fn, n, jit: bool, seed=1234):
  Tensor.manual_seed(seed)
  f = TinyJit(fn)
  with Context(JIT=int(jit)): return [[t.numpy().copy() for t in f(Tensor.ones(8, 8).contiguous())] for _ in range(n)]

def _draws(x): return x + Tensor.rand(8, 8), x * Tensor.randn(8, 8), Tensor.randint(8, low=0, high=1000)

def test_random_draws_advance_on_replay_and_match_no_jit():
  with_jit, without = _steps(_draws, 6, True), _steps(_draws, 6, False)
  for a, b in zip(with_jit, without):
    for x, y in zip(a, b): np.testing.assert_array_equal(x, y)
  for k in range(3):   # every step drew new numbers (replays used to repeat the capture's)
    assert len({s[k].tobytes() for s in with_jit}) == 6

def test_draws_outside_the_jit_interleave_like_without_it():
  def run(jit):
    Tensor.manual_seed(7)
    f, out = TinyJit(lambda x: (x + Tensor.rand(16)).contiguous()), []
    with Context(JIT=int(jit)):
      for _ in range(5):
        out.append(f(Tensor.zeros(16).contiguous()).numpy().copy())
        out.append(Tensor.rand(16).numpy())
    return out
  for a, b in zip(run(True), run(False)): np.testing.assert_array_equal(a, b)

def test_manual_seed_after_capture_restarts_the_replayed_stream():
  f = TinyJit(lambda x: (x + Tensor.rand(16)).contiguous())
  def four():
    Tensor.manual_seed(42)
    return [f(Tensor.zeros(16).contiguous()).numpy().copy() for _ in range(4)]
  first, second = four(), four()   # the second round is all replays
  assert f.cnt == 8
  for a, b in zip(first, second): np.testing.assert_array_equal(a, b)

def test_dropout_mask_differs_per_step():
  f = TinyJit(lambda x: x.dropout(0.5).contiguous())
  masks = []
  old, Tensor.training = Tensor.training, True
  try:
    Tensor.manual_seed(3)
    for _ in range(6): masks.append(f(Tensor.ones(256).contiguous()).numpy() != 0)
  finally: Tensor.training = old
  assert len({m.tobytes() for m in masks}) == 6
  for m in masks: assert 0.35 < m.mean() < 0.65   # p=0.5 over 256 elements: far outside this is a broken mask

def test_manual_seed_rejects_non_int():
  with pytest.raises(TypeError, match="int seed"): Tensor.manual_seed(1.5)
  Tensor.manual_seed(np.int64(5))
  a = Tensor.rand(4).numpy()
  Tensor.manual_seed(5)
  np.testing.assert_array_equal(a, Tensor.rand(4).numpy())
