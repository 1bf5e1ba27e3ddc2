"""Symbolic rules: unit tests per rule family, and hypothesis property tests that simplification keeps every value and
that vmin/vmax bound every value."""
import itertools, random
import pytest
from hypothesis import given, settings, strategies as st
from tinycore.uop import UOp, Ops, Variable, exec_alu
from tinycore.dtype import dtypes
from tinycore.rewrite import graph_rewrite
from tinycore.symbolic import symbolic, symbolic_simple, sym_simplify, uop_given_valid, simplify_valid, sym_index_valid

def ev(u: UOp, env: dict):
  """Evaluate an expression with C semantics (exec_alu) for one variable assignment."""
  vals = {}
  for n in u.toposort():
    if n.op is Ops.CONST: vals[n] = n.arg
    elif n.op is Ops.DEFINE_VAR: vals[n] = env[n.arg[0]]
    elif n.op is Ops.CAST: vals[n] = dtypes.as_const(vals[n.src[0]], n.dtype)
    else: vals[n] = exec_alu(n.op, n.dtype, tuple(vals[s] for s in n.src))
  return vals[u]

def S(u): return sym_simplify(u)
def R(u): return S(u).render()
i, j, k = Variable("i", 0, 5), Variable("j", 0, 2), Variable("k", 0, 3)
n = Variable("n", -8, 8)
def c(v, dt=dtypes.index): return UOp.const(dt, v)

# ---- constant folding and identities (symbolic_simple)
class TestSimple:
  def simple(self, u): return graph_rewrite(u, symbolic_simple)
  @pytest.mark.parametrize("op,a,b,want", [(Ops.ADD, 3, 4, 7), (Ops.MUL, 3, -4, -12), (Ops.IDIV, -7, 2, -3), (Ops.MOD, -7, 2, -1),
                                           (Ops.MAX, 3, 9, 9), (Ops.CMPLT, 3, 4, True), (Ops.CMPNE, 3, 3, False), (Ops.SUB, 1, 5, -4),
                                           (Ops.SHL, 1, 4, 16), (Ops.XOR, 5, 3, 6)])
  def test_fold_int(self, op, a, b, want):
    out = self.simple(UOp(op, dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dtypes.int32, (c(a, dtypes.int32), c(b, dtypes.int32))))
    assert out.op is Ops.CONST and out.arg == want
  def test_fold_respects_dtype(self):
    assert self.simple(c(200, dtypes.uint8) + c(100, dtypes.uint8)).arg == 44
    assert self.simple(c(127, dtypes.int8) + c(1, dtypes.int8)).arg == -128
    assert self.simple(c(0.1, dtypes.float32) * c(3.0, dtypes.float32)).arg == pytest.approx(0.3, rel=1e-6)
  def test_fold_unary_where(self):
    assert self.simple(UOp(Ops.NEG, dtypes.int32, (c(3, dtypes.int32),))).arg == -3
    assert self.simple(UOp(Ops.SQRT, dtypes.float32, (c(4.0, dtypes.float32),))).arg == 2.0
    assert self.simple(c(True, dtypes.bool).where(c(1), c(2))).arg == 1
  def test_cast(self):
    assert self.simple(c(3.7, dtypes.float32).cast(dtypes.int32)).arg == 3
    assert self.simple(c(-3.7, dtypes.float32).cast(dtypes.int32)).arg == -3
    assert self.simple(c(300, dtypes.int32).cast(dtypes.uint8)).arg == 44
    assert self.simple(c(5, dtypes.int32).cast(dtypes.bool)).arg is True
    x = Variable("x", 0, 10, dtypes.int32)
    assert self.simple(UOp(Ops.CAST, dtypes.int32, (x,))) is x
    assert self.simple(x.cast(dtypes.int64).cast(dtypes.int32)) is x
    assert self.simple(x.cast(dtypes.int8).cast(dtypes.int32)) is x
    y = Variable("y", 0, 1000, dtypes.int32)
    assert self.simple(y.cast(dtypes.int8).cast(dtypes.int32)).op is Ops.CAST  # lossy: must stay
  def test_identities(self):
    assert self.simple(i + 0) is i and self.simple(i * 1) is i and self.simple(i // 1) is i and self.simple(i - 0) is i
    assert self.simple(i * 0).arg == 0 and self.simple(i % 1).arg == 0 and self.simple(i - i).arg == 0
    assert self.simple(-(-i)) is i
    f = Variable("f", 0, 1, dtypes.float32)
    assert self.simple(f * 0).op is Ops.MUL  # NaN * 0 is NaN: no fold for floats
    assert self.simple(f - f).op is Ops.SUB
    assert self.simple(f + 0.0) is f and self.simple(f * 1.0) is f
  def test_self_division(self):
    p = Variable("p", 1, 9)
    assert self.simple(p // p).arg == 1 and self.simple(p % p).arg == 0
    assert self.simple(i // i).op is Ops.IDIV  # i may be 0
  def test_bool(self):
    b = Variable("b", 0, 1).lt(1)
    T, F = c(True, dtypes.bool), c(False, dtypes.bool)
    assert self.simple(b & T) is b and self.simple(b & F).arg is False and self.simple(b | T).arg is True and self.simple(b | F) is b
    assert self.simple(b & b) is b and self.simple(b | b) is b and self.simple(b ^ b).arg is False
    assert self.simple(b.ne(True).ne(True)) is b and self.simple(b.ne(False)) is b and self.simple(b.eq(True)) is b
  def test_where(self):
    b = Variable("b", 0, 1).lt(1)
    assert self.simple(b.where(i, i)) is i
    assert self.simple(b.where(c(True, dtypes.bool), c(False, dtypes.bool))) is b
    assert self.simple(b.ne(True).where(i, j)) is self.simple(b.where(j, i))

# ---- like terms and reassociation
class TestTerms:
  def test_like_terms(self):
    assert R(i + i) == "(i*2)" and R(i * 2 + i * 3) == "(i*5)" and R(i * 3 + j + i * -3) == "j"
    assert R(i + j + i) == "(j+(i*2))" and R(i - i) == "0" and R((i + j) - i) == "j"
  def test_constants(self):
    assert R((i + 3) + 4) == "(i+7)" and R((i * 3) * 4) == "(i*12)" and R((i + 3) + j) == "((i+j)+3)"
    assert R(3 + i) == "(i+3)" and R(2 * i) == "(i*2)" and R((i + 1) - 1) == "i" and R((i + 2) * 3) == "((i*3)+6)"
  def test_divmod_recombine(self):
    assert S((n // 4) * 4 + n % 4) is n  # holds for negative n too (C semantics)
    assert S(j + (i // 3) * 3 + i % 3) is S(j + i)
    assert S((n % 4) * 2 + (n // 4) * 8) is S(n * 2)

# ---- div/mod by value ranges
class TestDivMod:
  f = i * 12 + j * 4 + k
  def test_unflatten(self):
    f = self.f
    assert S(f // 4) is S(i * 3 + j) and S(f % 4) is k and S(f // 12) is i and S((f // 4) % 3) is j
    assert S(f % 12) is S(j * 4 + k) and S((f % 12) // 4) is j and S((f // 4) // 3) is i
  def test_range(self):
    assert S(k // 4).arg == 0 and S(k % 4) is k and S((i % 4) // 4).arg == 0
    assert S(n % 9) is n  # |n| < 9
    assert S(n // 9).arg == 0
  def test_exact(self):
    assert S((n * 6) // 3) is S(n * 2) and S((n * 6) % 3).arg == 0 and S((n * 4 + 8) // 4) is S(n + 2)
  def test_nested(self):
    assert S((n // 2) // 3) is S(n // 6)
    assert S((i % 6) // 2) is S((i // 2) % 3) and S((n % 6) % 3) is S(n % 3)
  def test_gcd(self):
    assert S((i * 4 + 2) // 8) is S(i // 2) and R((i * 4 + 2) % 8) == "(((i%2)*4)+2)"
  def test_negative_divisor(self):
    assert R(i // -2) == "((i//2)*-1)" and S(i % -2) is S(i % 2)
  def test_negative_numerator_not_folded(self):
    # (n + 4)//4 != n//4 + 1 in C for n in [-8, 8] (e.g. n = -1): nothing unsound may happen
    for u in [(n + 4) // 4, (n * 4 + 3) // 4, (n + 5) % 4]:
      s = S(u)
      for v in range(-8, 9): assert ev(s, {"n": v}) == ev(u, {"n": v})

# ---- comparisons and max
class TestCompare:
  def test_range_fold(self):
    assert S(i.lt(6)).arg is True and S(i.lt(0)).arg is False and S((i + j).lt(8)).arg is True and S(i.ne(7)).arg is True
    assert S(i.lt(i)).arg is False
  def test_rewrite(self):
    assert S((i + 2).lt(4)) is S(i.lt(2)) and S((i * 3).lt(7)) is S(i.lt(3)) and S((i // 2).lt(2)) is S(i.lt(4))
    assert S((i * 4 + j * 4).lt(9)) is S((i + j).lt(3))
  def test_const_on_left(self):
    assert S(c(0).lt(i + -1)) is S(c(1).lt(i)) and S(c(5).lt(i * 3)) is S(c(1).lt(i))
  def test_max(self):
    assert S(i.maximum(0)) is i and S(i.maximum(7)).arg == 7 and S(i.maximum(i)) is i and S(n.maximum(0)).op is Ops.MAX

# ---- validity masks
class TestValid:
  x = Variable("x", -5, 20)
  def test_given_valid(self):
    x = self.x
    valid = x.lt(0).ne(True) & x.lt(10)
    assert uop_given_valid(valid, x.maximum(0)) is x
    assert uop_given_valid(valid, (x + 1) // 20).arg == 0
    assert uop_given_valid(valid, valid.where(x, 0)) is x
  def test_pushes_through_offsets(self):
    r = Variable("r", 0, 11)
    p = r + -1  # pad by 1: index r-1 is valid when 0 <= r-1 < 10
    valid = p.lt(0).ne(True) & p.lt(10)
    assert uop_given_valid(valid, (p.maximum(0) % 10)) is S(p)
  def test_simplify_valid(self):
    x = self.x
    assert simplify_valid(x.lt(0).ne(True) & x.lt(10) & x.lt(15)) is x.lt(0).ne(True) & x.lt(10)
    assert simplify_valid(i.lt(0).ne(True) & i.lt(3)) is i.lt(3)
    assert simplify_valid(i.lt(9)).arg is True
    assert simplify_valid(x.lt(0) & x.lt(10).ne(True)).arg is False

def test_index_valid_rule():
  """INDEX(buf, idx, valid) as the lowerer makes it for a pad by 1: the mask simplifies the address."""
  r = Variable("r", 0, 11)
  p = r + -1
  buf = UOp(Ops.DEFINE_GLOBAL, dtypes.float32.ptr(40), (), 0)
  idx = buf.index((p.maximum(0) % 10) * 4 + p // 10, c(0).lt(r) & p.lt(10))
  out = graph_rewrite(idx, symbolic + sym_index_valid)
  assert out.src[1] is S(r * 4 + -4) and out.src[2] is S(c(0).lt(r) & r.lt(11))
  full = buf.index(r, r.lt(12))
  assert graph_rewrite(full, symbolic + sym_index_valid).src == (buf, r)

# ---- property tests: random expressions over bounded variables
VARS = ["a", "b", "c"]
def expr_tree(nonneg: bool):
  leaf = st.one_of(st.sampled_from(VARS).map(lambda v: ("var", v)), st.integers(-10 if not nonneg else 0, 10).map(lambda v: ("const", v)))
  def ext(children):
    cmp = st.tuples(st.just("lt"), children, children)
    return st.one_of(
      st.tuples(st.sampled_from(["add", "sub", "max"]), children, children),
      st.tuples(st.just("mulc"), children, st.integers(-4 if not nonneg else 0, 6)),
      st.tuples(st.just("mul"), children, children),
      st.tuples(st.sampled_from(["div", "mod"]), children, st.integers(1, 12) if nonneg else st.integers(-6, 12).filter(lambda v: v != 0)),
      st.tuples(st.just("where"), cmp, children, children))
  return st.recursive(leaf, ext, max_leaves=12)

def build(t, vs):
  tag = t[0]
  if tag == "var": return vs[t[1]]
  if tag == "const": return c(t[1])
  if tag == "mulc": return build(t[1], vs) * t[2]
  if tag == "div": return build(t[1], vs) // t[2]
  if tag == "mod": return build(t[1], vs) % t[2]
  if tag == "where": return build(t[1], vs).where(build(t[2], vs), build(t[3], vs))
  a, b = build(t[1], vs), build(t[2], vs)
  return {"add": a.__add__, "sub": a.__sub__, "mul": a.__mul__, "max": a.maximum, "lt": a.lt}[tag](b)

bounds = st.tuples(st.integers(-6, 6), st.integers(0, 9)).map(lambda t: (t[0], t[0] + t[1]))
nn_bounds = st.tuples(st.integers(0, 6), st.integers(0, 9)).map(lambda t: (t[0], t[0] + t[1]))

def check(tree, bnds):
  vs = {v: Variable(v, lo, hi) for v, (lo, hi) in zip(VARS, bnds)}
  u = build(tree, vs)
  s = sym_simplify(u)
  ranges = [range(lo, hi + 1) for lo, hi in bnds]
  envs = list(itertools.product(*ranges))
  if len(envs) > 300: envs = random.Random(0).sample(envs, 300) + [tuple(lo for lo, _ in bnds), tuple(hi for _, hi in bnds)]
  nodes = u.toposort()
  for e in envs:
    env = dict(zip(VARS, e))
    want, got = ev(u, env), ev(s, env)
    assert want == got, f"{u.render()} -> {s.render()} at {env}: {want} != {got}"
    assert s.vmin <= got <= s.vmax, f"simplified {s.render()} = {got} outside [{s.vmin}, {s.vmax}] at {env}"
    for x in nodes:  # every sub-expression's range must hold its value
      if x.dtype == dtypes.index:
        v = ev(x, env)
        assert x.vmin <= v <= x.vmax, f"{x.render()} = {v} outside [{x.vmin}, {x.vmax}] at {env}"

@given(expr_tree(False), st.tuples(bounds, bounds, bounds))
def test_property_any_sign(tree, bnds): check(tree, bnds)

@given(expr_tree(True), st.tuples(nn_bounds, nn_bounds, nn_bounds))
def test_property_nonneg(tree, bnds): check(tree, bnds)

@given(st.lists(st.integers(2, 6), min_size=2, max_size=4), st.data())
def test_property_unflatten(shape, data):
  """Flattening a multi-index and unflattening it with // and % must give back exactly the index variables."""
  vs = [Variable(f"x{d}", 0, s - 1) for d, s in enumerate(shape)]
  strides = [1]
  for s in reversed(shape[1:]): strides.insert(0, strides[0] * s)
  order = data.draw(st.permutations(range(len(shape))))
  flat = vs[order[0]] * strides[order[0]]
  for d in order[1:]: flat = flat + vs[d] * strides[d]
  for d, (s, st_) in enumerate(zip(shape, strides)):
    got = S((flat // st_) % s) if d else S(flat // st_)
    assert got is vs[d], f"{((flat // st_) % s).render()} -> {got.render()}"

@pytest.mark.nightly
@settings(max_examples=20000)
@given(expr_tree(False), st.tuples(bounds, bounds, bounds))
def test_property_nightly(tree, bnds): check(tree, bnds)

@pytest.mark.nightly
@settings(max_examples=20000)
@given(expr_tree(True), st.tuples(nn_bounds, nn_bounds, nn_bounds))
def test_property_nightly_nonneg(tree, bnds): check(tree, bnds)

@given(expr_tree(False), st.tuples(bounds, bounds, bounds), st.sampled_from(VARS), st.integers(-6, 10), st.integers(0, 8))
def test_property_given_valid(tree, bnds, var, lo, width):
  """Wherever the mask holds, the index simplified under the mask equals the original."""
  vs = {v: Variable(v, a, b) for v, (a, b) in zip(VARS, bnds)}
  u, x = build(tree, vs), vs[var]
  valid = x.lt(lo).ne(True) & x.lt(lo + width + 1)
  s = uop_given_valid(valid, u)
  for e in itertools.product(*[range(a, b + 1) for a, b in bnds]):
    env = dict(zip(VARS, e))
    if ev(valid, env): assert ev(s, env) == ev(u, env), f"{u.render()} -> {s.render()} given {valid.render()} at {env}"
