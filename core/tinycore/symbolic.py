"""Symbolic simplification as rewrite rules: constant folding, identities, like terms, value-range div/mod folding and
validity masks. Integer rules keep C semantics (IDIV/MOD truncate toward zero): a fold that only holds for floor division
is applied only where the numerator's value range is nonnegative."""
from __future__ import annotations
import math, itertools
from tinycore.uop import UOp, Ops, GroupOp, exec_alu
from tinycore.dtype import dtypes, DType, PtrDType, truncate
from tinycore.rewrite import UPat, PatternMatcher, graph_rewrite

# ---- small builders (index math is built a lot: skip the generic const_like/shape machinery)
_INT_SCALARS = frozenset((dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.index,
                          dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64))
_BOOL = frozenset((dtypes.bool,))
def _isint(d: DType) -> bool: return d in _INT_SCALARS  # scalar ints only: vectors and pointers hash differently
def _c(dtype: DType, v) -> UOp: return UOp(Ops.CONST, dtype, (), dtypes.as_const(v, dtype))
def _const_like(x: UOp, v) -> UOp:
  # tensor-level constants carry a DEVICE source: keep it when folding one
  src = x.src if x.op is Ops.CONST else next((s.src for s in x.src if s.op is Ops.CONST and s.src), ())
  return UOp(Ops.CONST, x.dtype, src, dtypes.as_const(v, x.dtype))
def _add(a: UOp, b: UOp) -> UOp: return UOp(Ops.ADD, a.dtype, (a, b))
def _mul(a: UOp, k: int) -> UOp:
  if k == 0: return _c(a.dtype, 0)
  return a if k == 1 else UOp(Ops.MUL, a.dtype, (a, _c(a.dtype, k)))
def _bin(op: Ops, a: UOp, b) -> UOp:
  return UOp(op, dtypes.bool if op in GroupOp.Comparison else a.dtype, (a, b if isinstance(b, UOp) else _c(a.dtype, b)))
def _not(x: UOp) -> UOp: return UOp(Ops.CMPNE, dtypes.bool, (x, _c(dtypes.bool, True)))

def _term(u: UOp) -> tuple[UOp | None, int]:
  """(base, coefficient) of a linear term; base is None for a constant."""
  if u.op is Ops.MUL and u.src[1].op is Ops.CONST: return u.src[0], u.src[1].arg
  if u.op is Ops.CONST: return None, u.arg
  return u, 1
def split_add(u: UOp) -> list[UOp]:
  """The terms of a sum, left to right."""
  out, stack = [], [u]
  while stack:
    n = stack.pop()
    if n.op is Ops.ADD: stack.append(n.src[1]); stack.append(n.src[0])
    else: out.append(n)
  return out
def _sum(dtype: DType, terms: list[tuple[UOp, int]], k: int = 0) -> UOp:
  acc = None
  for b, f in terms:
    if f == 0: continue
    t = _mul(b, f)
    acc = t if acc is None else _add(acc, t)
  if acc is None: return _c(dtype, k)
  return acc if k == 0 else _add(acc, _c(dtype, k))

# ---- constant folding and identities that hold for every dtype where they are applied
def fold_const(x: UOp) -> UOp | None:
  if x.dtype.count != 1: return None
  for s in x.src:
    if s.op is not Ops.CONST or isinstance(s.arg, tuple): return None
  return _const_like(x, exec_alu(x.op, x.dtype, tuple(s.arg for s in x.src)))

def fold_cast(x: UOp, c: UOp) -> UOp | None:
  if x.dtype.count != 1 or isinstance(c.arg, tuple) or isinstance(x.dtype, PtrDType): return None
  if dtypes.is_float(c.dtype) and not dtypes.is_float(x.dtype) and not math.isfinite(c.arg): return None  # UB in C: leave it
  return UOp(Ops.CONST, x.dtype, c.src, truncate(x.dtype, float(c.arg)) if dtypes.is_float(x.dtype) else dtypes.as_const(c.arg, x.dtype))

def _lossless_cast(x: UOp, w: DType) -> bool:
  return _isint(x.dtype) and _isint(w) and dtypes.min(w) <= x.vmin and x.vmax <= dtypes.max(w)

_T, _F = UPat.const(dtypes.bool, True), UPat.const(dtypes.bool, False)
_x, _y, _c1 = UPat.var("x"), UPat.var("y"), UPat.cvar("c1")
_ints = UPat(Ops.CONST, name="c1")
def _is0(c: UOp) -> bool: return not isinstance(c.arg, tuple) and c.arg == 0
def _is1(c: UOp) -> bool: return not isinstance(c.arg, tuple) and c.arg == 1

symbolic_simple = PatternMatcher([
  # constant folding of every ALU op on constants (exec_alu truncates to the dtype)
  (UPat(GroupOp.ALU, name="x"), fold_const),
  (UPat(Ops.CAST, name="x", src=(UPat(Ops.CONST, name="c"),)), fold_cast),
  (UPat(Ops.CAST, name="x"), lambda x: x.src[0] if x.src[0].dtype == x.dtype else None),
  (UPat(Ops.CAST, name="x", src=(UPat(Ops.CAST, name="y"),)),
   lambda x, y: (y.src[0] if y.src[0].dtype == x.dtype else UOp(Ops.CAST, x.dtype, y.src))
     if _isint(x.dtype) and _lossless_cast(y.src[0], y.dtype) else None),
  # additive and multiplicative identities
  (UPat(Ops.ADD, src=[_x, _ints]), lambda x, c1: x if _is0(c1) else None),
  (UPat(Ops.SUB, src=(_x, _ints)), lambda x, c1: x if _is0(c1) else None),
  (UPat(Ops.MUL, src=[_x, _ints]),
   lambda x, c1: x if _is1(c1) else _c(x.dtype, 0) if _is0(c1) and (_isint(x.dtype) or x.dtype == dtypes.bool) else None),
  (UPat(Ops.FDIV, src=(_x, _ints)), lambda x, c1: x if _is1(c1) else None),
  (UPat(Ops.SUB, src=(_x, _x)), lambda x: _c(x.dtype, 0) if _isint(x.dtype) else None),
  (UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(_x,)),)), lambda x: x),
  # integer division identities
  (UPat(Ops.IDIV, src=(_x, _ints)), lambda x, c1: x if _is1(c1) else None),
  (UPat(Ops.MOD, src=(_x, _ints)), lambda x, c1: _c(x.dtype, 0) if _is1(c1) and _isint(x.dtype) else None),
  (UPat((Ops.IDIV, Ops.MOD), name="d", src=(_x, _x)),
   lambda d, x: _c(x.dtype, 1 if d.op is Ops.IDIV else 0) if _isint(x.dtype) and (x.vmin > 0 or x.vmax < 0) else None),
  # self-comparisons of integers
  (UPat(Ops.CMPLT, src=(_x, _x)), lambda x: _c(dtypes.bool, False) if _isint(x.dtype) else None),
  (UPat(Ops.CMPNE, src=(_x, _x)), lambda x: _c(dtypes.bool, False) if _isint(x.dtype) or x.dtype == dtypes.bool else None),
  (UPat(Ops.CMPEQ, src=(_x, _x)), lambda x: _c(dtypes.bool, True) if _isint(x.dtype) or x.dtype == dtypes.bool else None),
  # boolean logic with constants (x.ne(True) is logical not)
  (UPat(Ops.AND, src=[UPat.var("x", dtypes.bool), _T]), lambda x: x),
  (UPat(Ops.AND, src=[UPat.var("x", dtypes.bool), _F]), lambda x: _c(dtypes.bool, False)),
  (UPat(Ops.OR, src=[UPat.var("x", dtypes.bool), _T]), lambda x: _c(dtypes.bool, True)),
  (UPat(Ops.OR, src=[UPat.var("x", dtypes.bool), _F]), lambda x: x),
  (UPat(Ops.XOR, src=[UPat.var("x", dtypes.bool), _F]), lambda x: x),
  (UPat(Ops.CMPNE, src=[UPat.var("x", dtypes.bool), _F]), lambda x: x),
  (UPat(Ops.CMPEQ, src=[UPat.var("x", dtypes.bool), _T]), lambda x: x),
  (UPat(Ops.CMPEQ, src=[UPat.var("x", dtypes.bool), _F]), lambda x: _not(x)),
  (UPat(Ops.CMPNE, src=(UPat(Ops.CMPNE, src=(UPat.var("x", dtypes.bool), _T)), _T)), lambda x: x),
  (UPat((Ops.AND, Ops.OR, Ops.MAX), src=(_x, _x)), lambda x: x),
  (UPat(Ops.XOR, src=(_x, _x)), lambda x: _c(x.dtype, 0) if _isint(x.dtype) or x.dtype == dtypes.bool else None),
  # where with a constant condition, equal branches, a negated condition, or bool branches
  (UPat(Ops.WHERE, src=(_T, _x, _y)), lambda x, y: x),
  (UPat(Ops.WHERE, src=(_F, _x, _y)), lambda x, y: y),
  (UPat(Ops.WHERE, src=(UPat.var("c"), _x, _x)), lambda c, x: x),
  (UPat(Ops.WHERE, src=(UPat.var("c", dtypes.bool), _T, _F)), lambda c: c),
  (UPat(Ops.WHERE, src=(UPat.var("c", dtypes.bool), _F, _T)), lambda c: _not(c)),
  (UPat(Ops.WHERE, src=(UPat(Ops.CMPNE, src=(UPat.var("c", dtypes.bool), _T)), _x, _y)), lambda c, x, y: UOp(Ops.WHERE, x.dtype, (c, y, x))),
])

# ---- integer sums and products: a canonical form in which like terms meet
# sums are left chains `((t0 + t1) + t2) + k` with the constant outermost; products keep their constant on the right.
def _combine(t: UOp, bb: UOp, cb: int) -> UOp | None:
  """t + bb*cb as one term, when they are like terms or (y//c)*c*k + (y%c)*k."""
  bt, ct = (t.src[0], t.src[1].arg) if t.op is Ops.MUL and t.src[1].op is Ops.CONST else (t, 1)
  if bt is bb: return _mul(bb, ct + cb)
  if bt.op is Ops.IDIV and bb.op is Ops.MOD: p, fp, q, fq = bt, ct, bb, cb
  elif bt.op is Ops.MOD and bb.op is Ops.IDIV: p, fp, q, fq = bb, cb, bt, ct
  else: return None
  if p.src[0] is q.src[0] and p.src[1] is q.src[1] and p.src[1].op is Ops.CONST and fp == fq * p.src[1].arg: return _mul(p.src[0], fq)
  return None

_CHAIN_LOOKBACK = 16  # how far down a sum to look for a like term: bounds the cost of long sums
def sym_add(x: UOp) -> UOp | None:
  if not _isint(x.dtype): return None
  a, b = x.src
  if a.op is Ops.CONST:
    return _add(b, a) if b.op is not Ops.CONST else None
  if b.op is Ops.CONST:
    if a.op is Ops.ADD and a.src[1].op is Ops.CONST: return _add(a.src[0], _c(x.dtype, a.src[1].arg + b.arg))
    return None
  if b.op is Ops.ADD: return _add(_add(a, b.src[0]), b.src[1])
  if a.op is Ops.ADD and a.src[1].op is Ops.CONST: return _add(_add(a.src[0], b), a.src[1])
  bb, cb = (b.src[0], b.src[1].arg) if b.op is Ops.MUL and b.src[1].op is Ops.CONST else (b, 1)
  cur, skipped = a, list[UOp]()
  for _ in range(_CHAIN_LOOKBACK):
    head, t = cur.src if cur.op is Ops.ADD else (None, cur)
    if (m := _combine(t, bb, cb)) is not None:
      acc = head
      for s in reversed(skipped): acc = s if acc is None else _add(acc, s)
      return m if acc is None else _add(acc, m)
    if head is None: break
    skipped.append(t)
    cur = head
  return None

def sym_sub(x: UOp) -> UOp | None:
  if not _isint(x.dtype): return None
  a, b = x.src
  return _add(a, _c(x.dtype, -b.arg)) if b.op is Ops.CONST else _add(a, _mul(b, -1))

def sym_mul(x: UOp) -> UOp | None:
  if not _isint(x.dtype): return None
  a, b = x.src
  if a.op is Ops.CONST: return UOp(Ops.MUL, x.dtype, (b, a)) if b.op is not Ops.CONST else None
  if b.op is Ops.CONST:
    k = b.arg
    if a.op is Ops.MUL and a.src[1].op is Ops.CONST: return _mul(a.src[0], a.src[1].arg * k)
    if a.op is Ops.ADD: return _add(_mul(a.src[0], k), _mul(a.src[1], k))
    return None
  if a.op is Ops.MUL and a.src[1].op is Ops.CONST: return UOp(Ops.MUL, x.dtype, (UOp(Ops.MUL, x.dtype, (a.src[0], b)), a.src[1]))
  if b.op is Ops.MUL and b.src[1].op is Ops.CONST: return UOp(Ops.MUL, x.dtype, (UOp(Ops.MUL, x.dtype, (a, b.src[0])), b.src[1]))
  return None

def sym_neg(x: UOp) -> UOp | None: return _mul(x.src[0], -1) if _isint(x.dtype) else None

def sym_max(x: UOp) -> UOp | None:
  if not _isint(x.dtype): return None
  a, b = x.src
  if a.vmin >= b.vmax: return a
  if b.vmin >= a.vmax: return b
  return None

# ---- division and modulo by a constant, decided by value ranges
def sym_divmod(x: UOp) -> UOp | None:
  if not _isint(x.dtype) or x.src[1].op is not Ops.CONST: return None
  a, c, dt, is_div = x.src[0], x.src[1].arg, x.dtype, x.op is Ops.IDIV
  if c == 0 or a.op is Ops.CONST: return None
  if c < 0: return _mul(_bin(Ops.IDIV, a, -c), -1) if is_div else _bin(Ops.MOD, a, -c)  # C: x/-c == -(x/c), x%-c == x%c
  if c == 1: return a if is_div else _c(dt, 0)
  lo, hi = a.vmin, a.vmax
  if not is_div and -c < lo and hi < c: return a
  # nested: (y//m)//c -> y//(m*c); (y%m)//c -> (y//c)%(m//c) and (y%m)%c -> y%c when c divides m (hold for either sign of y)
  if a.op is Ops.IDIV and a.src[1].op is Ops.CONST and a.src[1].arg > 0 and is_div: return _bin(Ops.IDIV, a.src[0], a.src[1].arg * c)
  if a.op is Ops.MOD and a.src[1].op is Ops.CONST and (m := a.src[1].arg) > 0 and m % c == 0:
    return _bin(Ops.MOD, _bin(Ops.IDIV, a.src[0], c), m // c) if is_div else _bin(Ops.MOD, a.src[0], c)
  # split the numerator a = c*Q + R, each term's factor f = c*q + r with 0 <= r < c
  quot, rem, k, mixed, moved = [], [], 0, False, False
  for t in split_add(a):
    base, f = _term(t)
    if base is None: k += f; continue
    q, r = divmod(f, c)
    if q: quot.append((base, q)); moved = True
    if r: rem.append((base, r)); mixed |= q != 0
  kq, kr = divmod(k, c)
  moved |= kq != 0
  if not rem and kr == 0: return _sum(dt, quot, kq) if is_div else _c(dt, 0)  # exact: holds for either sign
  if lo < 0: return None
  r_expr = _sum(dt, rem, kr)
  if r_expr.vmin < 0: return None
  if r_expr.vmax < c: return _sum(dt, quot, kq) if is_div else r_expr
  if (g := math.gcd(c, *(r for _, r in rem))) > 1:
    # R = g*R' + k2 with 0 <= k2 < g, so R//c == R'//(c/g) and R%c == (R'%(c/g))*g + k2
    k1, k2 = divmod(kr, g)
    r2 = _sum(dt, [(b, r // g) for b, r in rem], k1)
    if is_div: return None if mixed else _add(_sum(dt, quot, kq), _bin(Ops.IDIV, r2, c // g))
    return _add(_mul(_bin(Ops.MOD, r2, c // g), g), _c(dt, k2))
  if not moved or (is_div and mixed): return None
  return _add(_sum(dt, quot, kq), _bin(Ops.IDIV, r_expr, c)) if is_div else _bin(Ops.MOD, r_expr, c)

# ---- comparisons
def _ceildiv(a: int, b: int) -> int: return -(-a // b)
def sym_cmp(x: UOp) -> UOp | None:
  a, b = x.src
  if not _isint(a.dtype): return None
  if a.op is Ops.CONST and x.op is Ops.CMPLT and b.op is not Ops.CONST:
    # k < y + m  ->  k - m < y;   k < y*m (m > 0)  ->  floor(k/m) < y   (the form padding masks take)
    if b.op is Ops.ADD and b.src[1].op is Ops.CONST: return _bin(Ops.CMPLT, _c(a.dtype, a.arg - b.src[1].arg), b.src[0])
    if b.op is Ops.MUL and b.src[1].op is Ops.CONST and (m := b.src[1].arg) > 0: return _bin(Ops.CMPLT, _c(a.dtype, a.arg // m), b.src[0])
    return None
  if b.op is not Ops.CONST: return None
  c = b.arg
  if a.op is Ops.ADD and a.src[1].op is Ops.CONST: return _bin(x.op, a.src[0], c - a.src[1].arg)
  if x.op is not Ops.CMPLT: return None
  if a.op is Ops.MUL and a.src[1].op is Ops.CONST and (k := a.src[1].arg) > 0: return _bin(Ops.CMPLT, a.src[0], _ceildiv(c, k))
  if a.op is Ops.IDIV and a.src[1].op is Ops.CONST and (k := a.src[1].arg) > 0 and a.src[0].vmin >= 0: return _bin(Ops.CMPLT, a.src[0], c * k)
  if a.op is Ops.ADD:
    # a sum whose factors share a divisor g: g*S < c  <=>  S < ceil(c/g)
    terms = [_term(t) for t in split_add(a)]
    if all(bs is not None for bs, _ in terms) and (g := math.gcd(*(f for _, f in terms))) > 1:
      return _bin(Ops.CMPLT, _sum(a.dtype, [(bs, f // g) for bs, f in terms]), _ceildiv(c, g))
  return None

# any integer/bool expression whose range is a single value is that value
def fold_range(x: UOp) -> UOp | None:
  if x.dtype not in _INT_SCALARS and x.dtype not in _BOOL: return None
  lo, hi = x._min_max
  return _const_like(x, lo) if lo == hi else None

symbolic = symbolic_simple + PatternMatcher([
  (UPat(GroupOp.ALU | {Ops.CAST}, name="x"), fold_range),
  (UPat(Ops.ADD, name="x"), sym_add),
  (UPat(Ops.SUB, name="x"), sym_sub),
  (UPat(Ops.MUL, name="x"), sym_mul),
  (UPat(Ops.NEG, name="x"), sym_neg),
  (UPat(Ops.MAX, name="x"), sym_max),
  (UPat((Ops.IDIV, Ops.MOD), name="x"), sym_divmod),
  (UPat((Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ), name="x"), sym_cmp),
])

def sym_simplify(u: UOp) -> UOp: return graph_rewrite(u, symbolic)

# ---- validity masks (padding): simplify an index knowing a boolean mask holds
def split_and(valid: UOp) -> list[UOp]:
  out, stack = [], [valid]
  while stack:
    n = stack.pop()
    if n.op is Ops.AND and n.dtype == dtypes.bool: stack.append(n.src[1]); stack.append(n.src[0])
    else: out.append(n)
  return out

def _parse_clause(c: UOp) -> tuple[UOp, float, float] | None:
  """A clause as (expr, lo, hi): the bounds it puts on an integer expression."""
  neg = False
  if c.op in (Ops.CMPNE, Ops.CMPEQ) and c.src[1].op is Ops.CONST and c.src[1].dtype == dtypes.bool and c.src[0].op is Ops.CMPLT:
    neg, c = (c.src[1].arg is True) == (c.op is Ops.CMPNE), c.src[0]
  if c.op is not Ops.CMPLT or not _isint(c.src[0].dtype): return None
  a, b = c.src
  if b.op is Ops.CONST: return (a, b.arg, math.inf) if neg else (a, -math.inf, b.arg - 1)         # a < k  /  a >= k
  if a.op is Ops.CONST: return (b, -math.inf, a.arg) if neg else (b, a.arg + 1, math.inf)         # k < b  /  b <= k
  return None

def _bounds(valid: UOp) -> dict[UOp, list]:
  out: dict[UOp, list] = {}
  def put(e, lo, hi):
    cur = out.setdefault(e, [e.vmin, e.vmax])
    cur[0], cur[1] = max(cur[0], lo), min(cur[1], hi)
    # push the bound through e = y + k and e = y * k (k > 0) so it reaches the variables the index is built from
    if e.op is Ops.ADD and e.src[1].op is Ops.CONST: put(e.src[0], cur[0] - e.src[1].arg, cur[1] - e.src[1].arg)
    elif e.op is Ops.MUL and e.src[1].op is Ops.CONST and (k := e.src[1].arg) > 0:
      put(e.src[0], _ceildiv(cur[0], k) if cur[0] != -math.inf else -math.inf, cur[1] // k if cur[1] != math.inf else math.inf)
  for cl in split_and(valid):
    if (p := _parse_clause(cl)) is not None: put(*p)
  return out

_fresh = itertools.count()
def uop_given_valid(valid: UOp, u: UOp) -> UOp:
  """`u` simplified using that `valid` holds: the result equals `u` wherever `valid` is true."""
  valid = graph_rewrite(valid, symbolic)
  if valid.op is Ops.CONST: return graph_rewrite(u, symbolic)
  u = u.substitute({cl: _c(dtypes.bool, True) for cl in split_and(valid)})
  u = graph_rewrite(u, symbolic)
  for e, (lo, hi) in _bounds(valid).items():
    if lo > hi: return u  # the mask is never true: any value is fine, keep u
    if e.op is Ops.CONST or (lo, hi) == (e.vmin, e.vmax) or e not in set(u.toposort()): continue
    # swap e for a variable with the tighter range, simplify, and swap back
    v = UOp.variable(f"__valid{next(_fresh)}", int(lo), int(hi), e.dtype)
    s = graph_rewrite(u.substitute({e: v}), symbolic)
    u = graph_rewrite(s.substitute({v: e}), symbolic) if s is not u else u
  return u

def simplify_valid(valid: UOp) -> UOp:
  """A mask with the clauses that the others (or the value ranges) imply dropped."""
  clauses = list(dict.fromkeys(split_and(graph_rewrite(valid, symbolic))))
  kept: list[UOp] = []
  for i, cl in enumerate(clauses):
    rest = kept + clauses[i + 1:]
    s = uop_given_valid(_and(rest), cl) if rest else cl
    if s.op is Ops.CONST:
      if s.arg: continue
      return _c(dtypes.bool, False)
    kept.append(cl)
  return _and(kept)

def _and(xs: list[UOp]) -> UOp:
  if not xs: return _c(dtypes.bool, True)
  acc = xs[0]
  for x in xs[1:]: acc = UOp(Ops.AND, dtypes.bool, (acc, x))
  return acc

# an INDEX carries its mask: simplify the address knowing the mask holds, and drop the mask's implied clauses
def _index_valid(idx: UOp) -> UOp | None:
  if len(idx.src) != 3: return None
  buf, i, valid = idx.src
  nv = simplify_valid(valid)
  if nv.op is Ops.CONST and nv.arg is True: return UOp(Ops.INDEX, idx.dtype, (buf, i))
  ni = uop_given_valid(nv, i)
  return None if ni is i and nv is valid else UOp(Ops.INDEX, idx.dtype, (buf, ni, nv))
sym_index_valid = PatternMatcher([(UPat(Ops.INDEX, name="idx"), _index_valid)])
