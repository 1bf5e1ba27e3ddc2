"""Symbolic sizes and value ranges (issue 18): no kernel may access outside a buffer because of a Variable's value, value
ranges are exact past int32, and invalid shapes are refused at the frontend in the user's terms."""
import itertools
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from tinycore import Tensor, dtypes, Variable
from tinycore.uop import UOp, Ops, exec_alu
from tinycore.engine.run import run_schedule
from tinycore.engine.bounds import OutOfBoundsAccess

# ---- vmin/vmax against brute force
def evaluate(u: UOp, env: dict) -> int:
  """The value of an integer expression with its variables at `env`, node by node in python (exact for index math)."""
  vals: dict = {}
  for n in u.toposort():
    if n.op is Ops.CONST: vals[n] = n.arg
    elif n.op is Ops.DEFINE_VAR: vals[n] = env[n.arg[0]]
    else: vals[n] = exec_alu(n.op, n.dtype, tuple(vals[s] for s in n.src))
  return vals[u]

def _check_ranges(e: UOp, names: list[str], ranges: list[tuple[int, int]]):
  s = e.simplify()
  for point in itertools.product(*[range(lo, hi + 1) for lo, hi in ranges]):
    env = dict(zip(names, point))
    v = evaluate(e, env)
    assert e.vmin <= v <= e.vmax, f"{e.render()} = {v} at {env}, outside its range [{e.vmin}, {e.vmax}]"
    assert evaluate(s, env) == v, f"simplified {s.render()} != {e.render()} at {env}"
    assert s.vmin <= v <= s.vmax, f"{s.render()} = {v} at {env}, outside its range [{s.vmin}, {s.vmax}]"

def test_reported_expression_past_int32():
  a, b = UOp.variable("a", 0, 127), UOp.variable("b", 0, 159)
  e = (a * b * 29) * (a + a * 28)
  assert (e.vmin, e.vmax) == (0, 127 * 159 * 29 * 127 * 29)   # 2156753751 > 2**31-1: no wrap
  s = e.simplify()
  assert (s.vmin, s.vmax) == (0, 2156753751)
  for av, bv in [(0, 0), (127, 159), (100, 3), (127, 1)]:
    assert evaluate(s, {"a": av, "b": bv}) == av * bv * 29 * av * 29

_BIG = [2 ** 31 - 1, 2 ** 31, 2 ** 32 + 3, 3 * 2 ** 40, -(2 ** 31), -(2 ** 33) - 7]
def _exprs(names):
  leaf = st.one_of(st.sampled_from(names).map(lambda n: ("var", n)),
                   st.one_of(st.integers(-9, 9), st.sampled_from(_BIG)).map(lambda c: ("const", c)))
  def extend(children):
    bin_ = st.tuples(st.sampled_from(["+", "-", "*", "max"]), children, children)
    div = st.tuples(st.sampled_from(["//", "%"]), children,
                    st.one_of(st.integers(-7, 9).filter(lambda c: c != 0), st.sampled_from([2 ** 31, 3 ** 21])))
    where = st.tuples(st.just("where"), children, children, children, children)
    return st.one_of(bin_, div, where)
  return st.recursive(leaf, extend, max_leaves=7)

def _build(t, vars_):
  k = t[0]
  if k == "var": return vars_[t[1]]
  if k == "const": return UOp.const(dtypes.index, t[1])
  if k == "where": return _build(t[1], vars_).lt(_build(t[2], vars_)).where(_build(t[3], vars_), _build(t[4], vars_))
  a = _build(t[1], vars_)
  if k in ("//", "%"): return a // t[2] if k == "//" else a % t[2]
  b = _build(t[2], vars_)
  return {"+": a + b, "-": a - b, "*": a * b, "max": a.maximum(b)}[k]

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_expressions_ranges_and_simplify(data):
  names = ["a", "b", "c"]
  ranges = [data.draw(st.tuples(st.integers(-6, 4), st.integers(0, 9)).map(lambda r: (r[0], r[0] + r[1]))) for _ in names]
  vars_ = {n: UOp.variable(n, lo, hi) for n, (lo, hi) in zip(names, ranges)}
  e = _build(data.draw(_exprs(names)), vars_)
  if e.op is Ops.CONST: return
  _check_ranges(e, names, ranges)

@settings(max_examples=100, deadline=None)
@given(st.integers(0, 127), st.integers(0, 159), st.integers(1, 40))
def test_products_past_int32_are_exact(av, bv, k):
  # wide sweeps of the reported shape: fixed variables, large coefficients
  a, b = UOp.variable("a", 0, 127), UOp.variable("b", 0, 159)
  e = (a * b * k) * (a + a * (k - 1)) + 2 ** 33
  s = e.simplify()
  v = av * bv * k * av * k + 2 ** 33
  assert evaluate(s, {"a": av, "b": bv}) == v and s.vmin <= v <= s.vmax and e.vmax == 127 * 159 * k * 127 * k + 2 ** 33

# ---- symbolic views past their buffer
@pytest.mark.needs_device
def test_symbolic_shrink_past_the_end_is_refused():
  n = Variable("n", 1, 10 ** 8)
  with pytest.raises(ValueError, match=r"out of bounds for shape \(10,\) with n=1000000"):
    Tensor.arange(10).shrink(((0, n.bind(10 ** 6)),)).sum()
  with pytest.raises(ValueError, match=r"n=11"):
    Tensor.arange(10).shrink(((n.bind(11), 10),))
  assert Tensor.arange(10).shrink(((0, n.bind(7)),)).sum().item() == 21
  assert Tensor.arange(10).shrink(((n.bind(3), 10),)).sum().item() == 42

@pytest.mark.needs_device
def test_symbolic_reshape_with_wrong_count_is_refused():
  n = Variable("n", 1, 100)
  with pytest.raises(ValueError, match=r"\(10 elements\) into \(n=12,\) \(12 elements\) with n=12"):
    Tensor.arange(10).reshape(n.bind(12))
  assert Tensor.arange(10).reshape(n.bind(10)).sum().item() == 45

@pytest.mark.needs_device
@pytest.mark.parametrize("dev", ["CPU", "CPU:LLVM"])
def test_run_time_check_before_launch(dev):
  """A schedule built with a valid value, launched with one past the buffer (as a JIT replay would): refused, not run."""
  if dev == "CPU:LLVM": pytest.importorskip("llvmlite")
  from tinycore import Context
  with Context(DEV=dev):
    t = Tensor.arange(10).contiguous().realize()
    n = Variable("n", 1, 10 ** 8)
    out = t.shrink(((0, n.bind(5)),)).sum()
    sched = out.schedule()
    with pytest.raises(OutOfBoundsAccess, match=r"elements 0\.\.999999 of buffer 1, which has 10 elements, with n=1000000"):
      run_schedule(sched, {n: 10 ** 6})
    # a value inside the buffer runs, and gives the right answer
    sched = t.shrink(((0, n.bind(5)),)).sum().schedule()
    run_schedule(sched, {n: 9})
    assert np.frombuffer(sched[-1].bufs[0].as_buffer(), np.int32).tolist() == [36]

@pytest.mark.needs_device
def test_run_time_check_with_a_padded_view():
  # a gated (masked) access is checked where its mask holds: padding around a symbolic slice is fine
  n = Variable("n", 1, 20)
  t = Tensor.arange(10).contiguous().realize()
  sched = t.shrink(((0, n.bind(4)),)).pad(((2, 3),)).sum().schedule()
  run_schedule(sched, {n: 10})
  assert np.frombuffer(sched[-1].bufs[0].as_buffer(), np.int32).tolist() == [45]
  with pytest.raises(OutOfBoundsAccess, match="n=11"): run_schedule(sched, {n: 11})

# ---- invalid shapes at the frontend
@pytest.mark.parametrize("make, err, msg", [
  (lambda: Tensor.ones(-1), ValueError, r"negative dimension -1 in shape \(-1,\)"),
  (lambda: Tensor.zeros(2, -3), ValueError, r"negative dimension -3"),
  (lambda: Tensor.empty(-1), ValueError, r"negative dimension"),
  (lambda: Tensor.full((2, -1), 3), ValueError, r"negative dimension"),
  (lambda: Tensor.rand(-2), ValueError, r"negative dimension"),
  (lambda: Tensor.ones(2.0), TypeError, r"shape entries must be ints, got 2.0"),
  (lambda: Tensor.ones((2, "a")), TypeError, r"shape entries must be ints"),
  (lambda: Tensor.ones(None), TypeError, r"shape entries must be ints"),
  (lambda: Tensor.ones(6).reshape(4, 2), ValueError, r"can't reshape tensor of shape \(6,\)"),
  (lambda: Tensor.ones(6).reshape(-1, -1), ValueError, r"only one dimension can be -1"),
  (lambda: Tensor.ones(6).reshape(-2, -3), ValueError, r"negative dimension -2"),
  (lambda: Tensor.ones(6).reshape(2.5, 2), TypeError, r"shape entries must be ints"),
  (lambda: Tensor.ones(1).expand(-5), ValueError, r"negative dimension -5"),
])
def test_invalid_shapes_are_refused(make, err, msg):
  with pytest.raises(err, match=msg): make()

@pytest.mark.needs_device
def test_valid_shape_spellings():
  assert Tensor.ones(np.int64(3)).numpy().tolist() == [1.0, 1.0, 1.0]
  assert Tensor.ones(6).reshape(np.int64(2), -1).shape == (2, 3)
  assert Tensor.ones(2, 1).expand(-1, 3).shape == (2, 3)
  assert Tensor.zeros(0, 3).shape == (0, 3)
