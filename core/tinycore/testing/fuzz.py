"""Differential fuzzer: random small Tensor graphs, run by tinycore on a device and by a numpy reference interpreter of
the same graph, compared with tolerances that each op of the graph earns.

A graph is a tree of `Node`s drawn by hypothesis (`graphs(dtypes)`), top-down from the output shape, so every op gets
operands of the right shape by construction. Shapes use sizes that straddle every vector width (15/16/17 ... 255/256/257),
plus 0, 1 and primes. Leaves are seeded numpy arrays (`make_input`), so a failing graph prints as a few lines of Tensor
code that rerun it exactly (`to_code`); the device runs that very code (exec of our own generated text, never of input).

The reference keeps, next to each value, a per-element bound on how far a correct device may be from it (`err`):
the propagated error of the operands plus each op's rounding in the node's dtype (a few ulps for transcendental ops,
the smallest normal for flush-to-zero). An element whose result the bound can't pin down (a compare of two values
closer than their errors, a float->int cast at an integer boundary, an overflow) is marked unknown (err = inf) and
not compared. Ints and bools are exact; NaN must match NaN."""
from __future__ import annotations
import builtins, math
from dataclasses import dataclass
from typing import Any
import numpy as np
from tinycore.dtype import DType, dtypes, least_upper_dtype, least_upper_float, sum_acc_dtype

# sizes around every vector width and a few primes; hypothesis shrinks toward the front of this list
SIZES = (1, 0, 2, 3, 5, 7, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257)
ALL_DTYPES = tuple(sorted({d for d in dtypes.fields().values() if d != dtypes.void}))

def device_dtypes(device: str) -> tuple[DType, ...]:
  """The dtypes `device`'s renderer claims (renderer.claimed_dtypes; None means every dtype)."""
  from tinycore.device import Device
  claimed = Device[device].renderer.claimed_dtypes
  return tuple(d for d in ALL_DTYPES if claimed is None or d in claimed)

# ---- leaves
def make_input(shape: tuple, dtype: str, seed: int, special: bool = False, nonzero: bool = False) -> np.ndarray:
  """Deterministic values for a leaf: floats in [-4, 4] (with `special`, some 0, -0, +-inf, nan, 1, large), small ints,
  random bools. bfloat16/fp8 come back as float32 (the Tensor constructor rounds them). `nonzero`: a divisor."""
  dt, r = _dt(dtype), np.random.default_rng(seed)
  if dt == dtypes.bool: x = r.random(shape) < 0.5
  elif dtypes.is_int(dt):
    lo, hi = (0, 100) if dtypes.is_unsigned(dt) else (-50, 50)
    x = r.integers(lo, hi + 1, shape).astype(dt.np)
    if nonzero: x[x == 0] = 1
  else:
    x = r.uniform(-4, 4, shape)  # type: ignore[assignment]
    if special:
      pick = r.random(shape) < 0.2
      x = np.where(pick, r.choice(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 100.0]), shape), x)
    if nonzero: x[np.abs(x) < 0.25] = 0.5
    x = x.astype(dt.np if dt.fmt else np.float32)
  return np.asarray(x)

def _dt(name: str) -> DType: return getattr(dtypes, name)

# ---- the graph
@dataclass(eq=False)
class Node:
  op: str                          # input unary binary cmp where cast reduce reshape permute pad shrink flip expand slice matmul contiguous
  srcs: tuple[Node, ...]
  arg: Any
  shape: tuple[int, ...]
  dtype: DType
  def __repr__(self): return f"Node({self.op}, {self.arg!r}, {self.shape}, {self.dtype})"
  def _repr_pretty_(self, p, cycle): p.text("graph:\n" + to_code(self)[0])   # how hypothesis prints a falsifying example

def _numel(shape) -> int: return math.prod(shape)

UNARY_FLOAT = ("neg", "abs", "exp", "exp2", "log", "log2", "sqrt", "sin", "cos", "reciprocal", "relu", "sigmoid", "tanh", "floor", "trunc", "square")
UNARY_INT = ("neg", "abs", "relu", "square")
ARITH = ("add", "sub", "mul", "div", "maximum", "minimum")
BITWISE = ("and", "or", "xor")
CMP = ("<", "==", "!=", ">=")
REDUCE = ("sum", "max", "min", "prod", "mean")

def unary_dtype(name: str, d: DType) -> DType: return d
def binary_dtype(name: str, a: DType, b: DType) -> DType:
  d = least_upper_dtype(a, b)
  return least_upper_float(d) if name == "div" else d
def reduce_dtype(fn: str, d: DType) -> DType:
  if fn in ("sum", "prod"): return sum_acc_dtype(d)
  return least_upper_float(d) if fn == "mean" else d

# ---- generation (hypothesis)
def graphs(dts: tuple[DType, ...], max_nodes: int = 12, cap: int = 4096, specials: bool = True):
  """A hypothesis strategy of graphs whose every node has a dtype in `dts` and at most `cap` elements. `specials`: inputs
  may hold inf, nan and -0 (False for a device whose language lets it assume finite math: Renderer.ieee_specials)."""
  from hypothesis import strategies as st
  @st.composite
  def strat(draw):
    return _Gen(draw, dts, max_nodes, cap, specials).root()
  return strat()

class _Gen:
  def __init__(self, draw, dts, max_nodes, cap, specials=True):
    from hypothesis import strategies as st
    self.st, self.draw, self.dts, self.budget, self.cap, self.specials = st, draw, dts, max_nodes, cap, specials
    self.floats = [d for d in dts if dtypes.is_float(d)]
    self.ints = [d for d in dts if dtypes.is_int(d)]
  def pick(self, xs): return self.draw(self.st.sampled_from(list(xs)))
  def int(self, lo, hi): return self.draw(self.st.integers(lo, hi))
  def flag(self): return self.draw(self.st.booleans())
  def size(self, room: builtins.int, nonzero=False) -> builtins.int:
    return self.pick([s for s in SIZES if max(s, 1) <= room and (s or not nonzero)])
  def shape(self, numel_cap: builtins.int, ndim: builtins.int | None = None) -> tuple[builtins.int, ...]:
    ndim = self.int(0, 3) if ndim is None else ndim
    out: list[int] = []
    for _ in range(ndim): out.append(self.size(numel_cap // max(_numel(out), 1)))
    return tuple(out)
  def root(self) -> Node: return self.gen(self.shape(self.cap))

  def leaf(self, shape, dtype=None, nonzero=False) -> Node:
    dt = dtype or self.pick(self.dts)
    special = self.specials and dtypes.is_float(dt) and not nonzero and self.int(0, 3) == 0
    return Node("input", (), (self.int(0, 2**16), special, nonzero), shape, dt)
  def cast(self, n: Node, dt: DType) -> Node: return n if n.dtype == dt else Node("cast", (n,), dt, n.shape, dt)
  def as_float(self, n: Node) -> Node: return n if dtypes.is_float(n.dtype) else self.cast(n, self.pick(self.floats))
  def ok(self, dt: DType) -> bool: return dt in self.dts

  def gen(self, shape: tuple[int, ...]) -> Node:  # type: ignore[valid-type]
    self.budget -= 1
    if self.budget <= 0: return self.leaf(shape)
    kinds = ["input", "unary", "binary", "cmp", "where", "cast", "reduce", "movement", "movement", "matmul", "contiguous"]
    kind = self.pick(kinds)
    return getattr(self, f"g_{kind}")(shape)

  def g_input(self, shape): return self.leaf(shape)
  def g_contiguous(self, shape):
    c = self.gen(shape)
    return Node("contiguous", (c,), None, shape, c.dtype)
  def g_cast(self, shape):
    c = self.gen(shape)
    return Node("cast", (c,), dt := self.pick(self.dts), shape, dt)
  def g_unary(self, shape):
    c = self.gen(shape)
    if c.dtype == dtypes.bool: return Node("unary", (c,), "logical_not", shape, dtypes.bool)
    if dtypes.is_int(c.dtype) and self.flag(): return Node("unary", (c,), self.pick(UNARY_INT), shape, c.dtype)
    c = self.as_float(c)
    return Node("unary", (c,), self.pick(UNARY_FLOAT), shape, c.dtype)
  def bshape(self, shape):
    """A shape that broadcasts to `shape`: some dims set to 1, maybe leading dims dropped."""
    if not shape or self.flag(): return shape
    s = tuple(1 if self.flag() else d for d in shape)
    return s[self.int(0, len(s)):]
  def operands(self, shape):
    a, b = self.gen(shape), self.gen(self.bshape(shape))
    if self.flag(): a, b = b, a
    return a, b
  def g_binary(self, shape):
    a, b = self.operands(shape)
    name = self.pick(ARITH + BITWISE + ("floordiv", "mod"))
    d = least_upper_dtype(a.dtype, b.dtype)
    if name in ("floordiv", "mod"):
      if not dtypes.is_int(d): name = "div"
      else: b = self.leaf(b.shape, b.dtype if dtypes.is_int(b.dtype) else d, nonzero=True)   # a divisor never 0
    if name in BITWISE and not (dtypes.is_int(d) or d == dtypes.bool): name = "mul"
    if name in ("add", "sub", "mul") and d == dtypes.bool: name = self.pick(BITWISE)
    out = binary_dtype(name, a.dtype, b.dtype)
    if not self.ok(out) or not self.ok(least_upper_dtype(a.dtype, b.dtype)): b = self.cast(b, a.dtype); out = binary_dtype(name, a.dtype, a.dtype)
    if not self.ok(out): return self.leaf(shape)
    return Node("binary", (a, b), name, shape, out)
  def g_cmp(self, shape):
    a, b = self.operands(shape)
    if not self.ok(least_upper_dtype(a.dtype, b.dtype)): b = self.cast(b, a.dtype)
    return Node("cmp", (a, b), self.pick(CMP), shape, dtypes.bool)
  def g_where(self, shape):
    c = self.gen(self.bshape(shape))
    if c.dtype != dtypes.bool: c = Node("cast", (c,), dtypes.bool, c.shape, dtypes.bool)
    x, y = self.operands(shape)
    if not self.ok(least_upper_dtype(x.dtype, y.dtype)): y = self.cast(y, x.dtype)
    return Node("where", (c, x, y), None, shape, least_upper_dtype(x.dtype, y.dtype))
  def g_reduce(self, shape):
    fn, room = self.pick(REDUCE), self.cap // max(_numel(shape), 1)
    keep = any(s == 1 for s in shape) and self.flag()
    child, axes = list(shape), []
    for _ in range(self.int(1, 2)):
      cap = min(room // max(_numel([child[a] for a in axes]), 1), 33 if fn == "prod" else 1 << 30)
      n = self.size(max(cap, 1), nonzero=fn in ("max", "min"))
      if keep:
        ones = [i for i, s in enumerate(child) if s == 1 and i not in axes]
        if not ones: break
        i = self.pick(ones); child[i] = n
      else:
        i = self.int(0, len(child)); child.insert(i, n)
        axes = [a + (a >= i) for a in axes]
      axes.append(i)
    c = self.gen(tuple(child))
    out = reduce_dtype(fn, c.dtype)
    if not self.ok(out): return self.leaf(shape)
    return Node("reduce", (c,), (fn, tuple(sorted(axes)), keep), shape, out)
  def g_matmul(self, shape):
    if not shape: return self.g_reduce(shape)
    room = self.cap // max(_numel(shape), 1)
    k = self.size(max(room, 1))
    if len(shape) == 1: sa, sb = (k,), (k, shape[0])
    else: sa, sb = shape[:-1] + (k,), ((k, shape[-1]) if self.flag() else shape[:-2] + (k, shape[-1]))
    if _numel(sa) > self.cap or _numel(sb) > self.cap: return self.g_reduce(shape)
    a, b = self.gen(sa), self.gen(sb)
    if not self.ok(least_upper_dtype(a.dtype, b.dtype)): b = self.cast(b, a.dtype)
    return Node("matmul", (a, b), None, shape, least_upper_dtype(a.dtype, b.dtype))

  def mv(self, op, child: Node, arg, shape) -> Node: return Node(op, (child,), arg, shape, child.dtype)   # keeps its dtype
  def g_movement(self, shape):
    kind = self.pick(("reshape", "permute", "pad", "shrink", "flip", "expand", "slice"))
    room = self.cap // max(_numel(shape), 1)
    n = len(shape)
    if n == 0 and kind in ("pad", "shrink", "slice", "permute"): kind = "reshape"
    if kind == "reshape":
      child = list(shape)
      if child and self.flag():                     # merge two neighbours / split one
        i = self.int(0, len(child) - 1)
        divs = [d for d in range(1, child[i] + 1) if child[i] % d == 0] if child[i] else [0]
        a = self.pick(divs); child[i:i + 1] = [a, child[i] // a if a else self.size(8)]
      elif len(child) >= 2:
        i = self.int(0, len(child) - 2); child[i:i + 2] = [child[i] * child[i + 1]]
      else: child = child + [1] if self.flag() else [1] + child
      if _numel(child) != _numel(shape): child = list(shape)
      return self.mv("reshape", self.gen(tuple(child)), shape, shape)
    if kind == "permute":
      perm = tuple(self.draw(self.st.permutations(range(n))))
      child = [0] * n
      for i, p in enumerate(perm): child[p] = shape[i]
      return self.mv("permute", self.gen(tuple(child)), perm, shape)
    if kind == "pad":
      pads = []
      for s in shape:
        l = self.int(0, min(3, s)); r = self.int(0, min(3, s - l)); pads.append((l, r))
      child = tuple(s - l - r for s, (l, r) in zip(shape, pads))
      return self.mv("pad", self.gen(child), tuple(pads), shape)
    if kind == "shrink":
      bounds, child = [], []
      for s in shape:
        extra = min(4, room - 1) if room > 1 else 0
        l = self.int(0, extra); r = self.int(0, extra - l) if extra > l else 0
        if _numel(child) * (s + l + r) * _numel(shape[len(child) + 1:]) > self.cap: l = r = 0
        child.append(s + l + r); bounds.append((l, l + s))
      return self.mv("shrink", self.gen(tuple(child)), tuple(bounds), shape)
    if kind == "flip":
      axes = tuple(i for i in range(n) if self.flag())
      return self.mv("flip", self.gen(shape), axes, shape)
    if kind == "expand":
      child = tuple(1 if self.flag() else s for s in shape)
      child = child[self.int(0, n):] if self.flag() else child
      return self.mv("expand", self.gen(child), shape, shape)
    # strided slice: child[start:stop:step] has `shape`
    slices, child = [], []
    for s in shape:
      step = self.pick((1, 2, 3, -1, -2))
      span = (s - 1) * abs(step) + 1 if s else 0
      extra = self.int(0, 2)
      size = span + extra
      if _numel(child) * max(size, 1) * _numel(shape[len(child) + 1:]) > self.cap: step, size, extra, span = 1, s, 0, s
      start = self.int(0, extra)
      if step > 0: sl = (start, start + span, step) if s else (start, start, 1)
      else:
        first = size - 1 - start
        sl = (first, (first - span if first - span >= 0 else None), step) if s else (0, 0, 1)
      slices.append(sl); child.append(size)
    return self.mv("slice", self.gen(tuple(child)), tuple(slices), shape)


# ---- the graph as Tensor code
_BIN = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&", "or": "|", "xor": "^", "floordiv": "//", "mod": "%"}
def to_code(root: Node) -> tuple[str, str]:
  """(code, name of the result): runnable Tensor code that builds `root`."""
  names: dict[int, str] = {}
  lines: list[str] = []
  def emit(n: Node) -> str:
    if id(n) in names: return names[id(n)]
    s = [emit(c) for c in n.srcs]
    a = n.arg
    if n.op == "input":
      seed, special, nonzero = a
      opts = (", special=True" if special else "") + (", nonzero=True" if nonzero else "")
      e = f"Tensor(make_input({n.shape}, {n.dtype.name!r}, {seed}{opts}), dtype=dtypes.{n.dtype.name})"
    elif n.op == "unary": e = f"{s[0]}.{a}()"
    elif n.op == "binary": e = f"({s[0]} {_BIN[a]} {s[1]})" if a in _BIN else f"{s[0]}.{a}({s[1]})"
    elif n.op == "cmp": e = f"({s[0]} {a} {s[1]})"
    elif n.op == "where": e = f"{s[0]}.where({s[1]}, {s[2]})"
    elif n.op == "cast": e = f"{s[0]}.cast(dtypes.{a.name})"
    elif n.op == "reduce": e = f"{s[0]}.{a[0]}(axis={a[1]}, keepdim={a[2]})"
    elif n.op == "reshape": e = f"{s[0]}.reshape({a})"
    elif n.op == "permute": e = f"{s[0]}.permute({a})"
    elif n.op == "pad": e = f"{s[0]}.pad({a})"
    elif n.op == "shrink": e = f"{s[0]}.shrink({a})"
    elif n.op == "flip": e = f"{s[0]}.flip({a})" if a else s[0]
    elif n.op == "expand": e = f"{s[0]}.expand({a})"
    elif n.op == "slice":
      fmt = lambda v: "" if v is None else str(v)   # noqa: E731
      e = f"{s[0]}[{', '.join(f'{fmt(b)}:{fmt(c)}:{st}' for b, c, st in a)}]" if a else s[0]
    elif n.op == "matmul": e = f"({s[0]} @ {s[1]})"
    elif n.op == "contiguous": e = f"{s[0]}.contiguous()"
    else: raise ValueError(f"unknown node op {n.op}")
    names[id(n)] = name = f"t{len(names)}"
    lines.append(f"{name} = {e}")
    return name
  out = emit(root)
  head = "from tinycore import Tensor, dtypes\nfrom tinycore.testing.fuzz import make_input\n"
  return head + "\n".join(lines) + f"\nprint({out}.numpy())", out

def run_tinycore(root: Node) -> tuple[np.ndarray, DType]:
  from tinycore import Tensor
  code, out = to_code(root)
  env: dict[str, Any] = {}
  exec(compile(code.rsplit("\n", 1)[0], "<fuzz graph>", "exec"), env)   # our own generated text (see to_code)
  t: Tensor = env[out]
  return t.numpy(), t.dtype

# ---- the numpy reference with error bounds
_MAXF = {dtypes.float16: 65504.0, dtypes.bfloat16: 3.3895e38, dtypes.float32: 3.4028e38, dtypes.float64: 1.797e308,
         dtypes.fp8e4m3: 448.0, dtypes.fp8e5m2: 57344.0}
def eps(dt: DType) -> float: return 2.0 ** -dtypes.finfo(dt)[1]
def tiny(dt: DType) -> float: return 2.0 ** (2 - 2 ** (dtypes.finfo(dt)[0] - 1))   # smallest normal: flush-to-zero is allowed

def fround(x: np.ndarray, dt: DType) -> np.ndarray:
  """x rounded to float dtype dt (as float64)."""
  x = np.asarray(x, np.float64)
  with np.errstate(all="ignore"):
    if dt == dtypes.float64: return x
    if dt.fmt: return x.astype(dt.np).astype(np.float64)
    from tinycore.engine.numeric import bits_to_float, float_to_bits
    return bits_to_float(float_to_bits(x.astype(np.float32), dt), dt).astype(np.float64)

@dataclass
class Ref:
  val: np.ndarray      # float64 for float dtypes, the exact numpy dtype for ints and bool
  err: np.ndarray      # float64 bound on |device - val|; inf where unknown
  dtype: DType

def _smul(x, y):   # x*y with 0*inf = 0: a zero bound times anything is zero
  with np.errstate(all="ignore"): return np.where((x == 0) | (y == 0), 0.0, x * y)

def _finish(exact, prop, dt: DType, ulps: float = 1.0) -> Ref:
  """A float result: rounded to dt, its bound widened by `ulps` roundings; unknown where it may overflow."""
  with np.errstate(all="ignore"):
    exact = np.asarray(exact, np.float64)
    r = fround(exact, dt)
    fin = np.isfinite(exact)
    e = np.asarray(prop, np.float64) + np.where(fin, ulps * eps(dt) * np.abs(exact) + (tiny(dt) if ulps else 0.0), 0.0)
    e = np.where(np.isnan(e), np.inf, e)
    e = np.where(fin & (np.abs(exact) + e > _MAXF[dt.scalar()] / 2), np.inf, e)
  return Ref(r, e, dt)

def _exact(val, err, dt) -> Ref:
  """An int/bool result: any nonzero bound means unknown."""
  return Ref(np.asarray(val), np.where(np.asarray(err) > 0, np.inf, 0.0), dt)

def ref_cast(x: Ref, dt: DType) -> Ref:
  if x.dtype == dt: return x
  with np.errstate(all="ignore"):
    if dtypes.is_float(dt): return _finish(x.val.astype(np.float64), x.err, dt)
    if not dtypes.is_float(x.dtype):
      return _exact(x.val != 0 if dt == dtypes.bool else x.val.astype(dt.np), x.err, dt)
    v, e = x.val, x.err
    if dt == dtypes.bool: return _exact(v != 0, np.where(((np.abs(v) <= e) & (e > 0)) | np.isinf(e), np.inf, 0.0), dt)
    t = np.trunc(v)
    bad = ~np.isfinite(v) | (np.trunc(v - e) != np.trunc(v + e)) | (t < dtypes.min(dt)) | (t > dtypes.max(dt))
    t = np.where(bad, 0, t)
    return _exact((t.astype(np.uint64) if dtypes.is_unsigned(dt) else t.astype(np.int64)).astype(dt.np), np.where(bad, np.inf, 0.0), dt)

def ref_unary(name: str, x: Ref) -> Ref:
  r = _ref_unary(name, x)
  # an unknown operand gives an unknown result; the bounds below test `v > 0` and the like, which a NaN value fails, so
  # 1/NaN with an unknown bound would otherwise come out as a known NaN
  return Ref(r.val, np.where(np.isinf(x.err), np.inf, r.err), r.dtype)

def _ref_unary(name: str, x: Ref) -> Ref:
  v, e, dt = x.val, x.err, x.dtype
  if dt == dtypes.bool: return _exact(~v, e, dt)
  if not dtypes.is_float(dt):
    with np.errstate(all="ignore"):
      out = {"neg": lambda: -v, "abs": lambda: np.abs(v), "relu": lambda: np.where(v < 0, 0, v).astype(v.dtype), "square": lambda: v * v}[name]()
    return _exact(out.astype(dt.np), e, dt)
  ep = eps(dt)
  with np.errstate(all="ignore"):
    ax = np.abs(v)
    if name in ("neg", "abs", "relu"): return _finish({"neg": -v, "abs": ax, "relu": np.where(v < 0, 0.0, v)}[name], e, dt, 0)
    if name in ("floor", "trunc"):
      f = np.floor if name == "floor" else np.trunc
      return _finish(f(v), np.where(f(v - e) != f(v + e), np.inf, 0.0), dt, 0)
    if name == "square": return _finish(v * v, 2 * _smul(ax, e) + e * e, dt)
    if name in ("exp", "exp2"):
      k = 1.0 if name == "exp" else math.log(2)
      r = np.exp(v) if name == "exp" else np.exp2(v)
      prop = np.where(np.isfinite(v), _smul(np.abs(r), np.expm1(k * (e + 2 * ep * ax))), np.where(e > 0, np.inf, 0.0))
      return _finish(r, prop, dt, 4)
    if name in ("log", "log2"):
      k = 1.0 if name == "log" else 1 / math.log(2)
      r = np.log(v) if name == "log" else np.log2(v)
      prop = np.where((e > 0) & (v - e <= 0), np.inf, np.where(v > 0, -k * np.log1p(-e / np.where(v > 0, v, 1)), 0.0)) + ep
      return _finish(r, prop, dt, 4)
    if name == "sqrt":
      prop = np.where((e > 0) & (v - e < 0), np.inf, np.sqrt(v + e) - np.sqrt(np.maximum(v - e, 0)))
      return _finish(np.sqrt(v), np.where(np.isfinite(v), prop, 0.0), dt, 2)
    if name in ("sin", "cos"):
      r = np.sin(v) if name == "sin" else np.cos(v)
      return _finish(r, e + ep * (4 + 2 * np.where(np.isfinite(ax), ax, 0)), dt, 4)
    if name == "reciprocal":
      prop = np.where((e > 0) & (ax <= e), np.inf, np.where(ax > 0, e / (ax * np.maximum(ax - e, 1e-300)), 0.0))
      return _finish(1.0 / v, prop, dt, 2)
    if name == "sigmoid":
      r = 1.0 / (1.0 + np.exp(-v))
      return _finish(r, e / 4 + r * ep * (8 + 2 * np.where(np.isfinite(ax), ax, 0)), dt, 2)
    if name == "tanh":
      return _finish(np.tanh(v), e + ep * (8 + 4 * np.where(np.isfinite(ax), ax, 0)), dt, 2)
  raise ValueError(f"unknown unary {name}")

def ref_binary(name: str, a: Ref, b: Ref) -> Ref:
  r = _ref_binary(name, a, b)
  # an unknown operand gives an unknown result: _smul's 0*inf = 0 would make (unknown, maybe overflowed) * 0 a known 0
  # (or, with the value itself inf, a known NaN), though the device may hold inf there and get NaN, or hold it finite
  return Ref(r.val, np.where(np.isinf(a.err) | np.isinf(b.err), np.inf, r.err), r.dtype)

def _ref_binary(name: str, a: Ref, b: Ref) -> Ref:
  d = least_upper_dtype(a.dtype, b.dtype)
  if name == "div": d = least_upper_float(d)
  a, b = ref_cast(a, d), ref_cast(b, d)
  x, y, ex, ey = a.val, b.val, a.err, b.err
  with np.errstate(all="ignore"):
    if not dtypes.is_float(d):
      f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum, "and": np.bitwise_and,
           "or": np.bitwise_or, "xor": np.bitwise_xor, "floordiv": np.floor_divide, "mod": np.mod}[name]
      if d == dtypes.bool and name in ("maximum", "minimum"): f = {"maximum": np.logical_or, "minimum": np.logical_and}[name]
      return _exact(np.asarray(f(x, y)).astype(d.np), np.broadcast_to(ex + ey, np.broadcast_shapes(x.shape, y.shape)), d)
    ax, ay = np.abs(x), np.abs(y)
    if name in ("add", "sub"): return _finish(x + y if name == "add" else x - y, ex + ey, d)
    if name == "mul": return _finish(x * y, _smul(ax, ey) + _smul(ay, ex) + _smul(ex, ey), d)
    if name in ("maximum", "minimum"): return _finish(np.maximum(x, y) if name == "maximum" else np.minimum(x, y), np.maximum(ex, ey), d, 0)
    if name == "div":   # a * (1/b): the reciprocal rounds once more
      er = np.where((ey > 0) & (ay <= ey), np.inf, np.where(ay > 0, ey / (ay * np.maximum(ay - ey, 1e-300)) + eps(d) / np.where(ay > 0, ay, 1), 0.0))
      prop = _smul(ax, er) + np.where(ay > 0, ex / np.where(ay > 0, ay, 1), np.where(ex > 0, np.inf, 0.0)) + _smul(ex, er)
      return _finish(x / y, prop, d, 2)
  raise ValueError(f"unknown binary {name} for {d}")

def ref_cmp(op: str, a: Ref, b: Ref) -> Ref:
  d = least_upper_dtype(a.dtype, b.dtype)
  a, b = ref_cast(a, d), ref_cast(b, d)
  x, y = a.val, b.val
  r = {"<": np.less, "==": np.equal, "!=": np.not_equal, ">=": np.greater_equal}[op](x, y)
  e = a.err + b.err
  if dtypes.is_float(d):
    with np.errstate(all="ignore"): close = (e > 0) & (np.abs(x - y) <= e)
    e = np.where(close | np.isinf(e), np.inf, 0.0)
  return _exact(r, np.broadcast_to(e, r.shape), dtypes.bool)

def ref_where(c: Ref, x: Ref, y: Ref) -> Ref:
  d = least_upper_dtype(x.dtype, y.dtype)
  x, y = ref_cast(x, d), ref_cast(y, d)
  shape = np.broadcast_shapes(c.val.shape, x.val.shape, y.val.shape)
  cv, cu = np.broadcast_to(c.val, shape), np.broadcast_to(c.err > 0, shape)
  r = np.where(cv, x.val, y.val)
  same = (x.val == y.val) | (np.isnan(x.val) & np.isnan(y.val)) if dtypes.is_float(d) else x.val == y.val
  e = np.where(cu & ~same, np.inf, np.where(cu, np.maximum(x.err, y.err), np.where(cv, x.err, y.err)))
  return Ref(r, np.broadcast_to(e, shape).astype(np.float64), d)

def _partials_may_overflow(r: Ref, bound) -> Ref:
  """Unknown where `bound` (on |every partial sum or product| the device may form, in any order) may overflow r's dtype
  though the total doesn't: a bfloat16 prod of 39 numbers up to 50 and a 0 is 0 in float64, but the device's running
  product reaches inf first and inf * 0 is NaN. Only float results: an int's partials wrap as its total does."""
  with np.errstate(all="ignore"): bad = ~(np.asarray(bound, np.float64) <= _MAXF[r.dtype.scalar()] / 2)
  return Ref(r.val, np.where(bad, np.inf, r.err), r.dtype)

def _finite_mag(x: Ref) -> np.ndarray:
  """|x| + its bound where x is finite, 0 where it is +-inf/NaN (those decide the result whatever the order)."""
  with np.errstate(all="ignore"): return np.where(np.isfinite(x.val), np.abs(x.val.astype(np.float64)) + x.err, 0.0)

def ref_reduce(fn: str, axes: tuple, keep: bool, x: Ref) -> Ref:
  r = _ref_reduce(fn, axes, keep, x)
  if not dtypes.is_float(r.dtype): return r
  with np.errstate(all="ignore"):   # an unknown (inf) bound may make inf or NaN here: unknown either way
    if fn == "sum": return _partials_may_overflow(r, _finite_mag(ref_cast(x, r.dtype)).sum(axes, keepdims=keep))
    if fn == "prod": return _partials_may_overflow(r, np.maximum(_finite_mag(ref_cast(x, r.dtype)), 1.0).prod(axes, keepdims=keep))
  return r   # mean's partial sums are its sum's; max/min form none

def _ref_reduce(fn: str, axes: tuple, keep: bool, x: Ref) -> Ref:
  n = math.prod(x.val.shape[a] for a in axes)
  if fn == "mean":
    s = ref_reduce("sum", axes, keep, ref_cast(x, least_upper_float(x.dtype)))
    with np.errstate(all="ignore"): return _finish(s.val / n if n else s.val * np.nan, s.err / max(n, 1), s.dtype, 2)
  d = reduce_dtype(fn, x.dtype)
  x = ref_cast(x, d)
  v, e = x.val, x.err
  with np.errstate(all="ignore"):
    if not dtypes.is_float(d):
      if d == dtypes.bool: r = v.any(axes, keepdims=keep) if fn == "max" else v.all(axes, keepdims=keep)
      elif fn in ("max", "min"): r = (np.max if fn == "max" else np.min)(v, axis=axes, keepdims=keep)
      else: r = (np.sum if fn == "sum" else np.prod)(v, axis=axes, keepdims=keep, dtype=d.np)   # wraps like the device
      return _exact(np.asarray(r).astype(d.np), e.max(axes, keepdims=keep, initial=0.0), d)
    av = np.where(np.isfinite(v), np.abs(v), 0.0)
    if fn == "sum": return _finish(v.sum(axes, keepdims=keep), e.sum(axes, keepdims=keep) + n * eps(d) * av.sum(axes, keepdims=keep), d)
    if fn in ("max", "min"): return _finish((v.max if fn == "max" else v.min)(axes, keepdims=keep), e.max(axes, keepdims=keep), d, 0)
    hi, lo = (np.abs(v) + e).prod(axes, keepdims=keep), np.abs(v).prod(axes, keepdims=keep)
    return _finish(v.prod(axes, keepdims=keep), hi - lo + n * eps(d) * lo, d)

def ref_matmul(a: Ref, b: Ref) -> Ref:
  r = _ref_matmul(a, b)
  if not dtypes.is_float(r.dtype): return r
  with np.errstate(all="ignore"): return _partials_may_overflow(r, _finite_mag(ref_cast(a, r.dtype)) @ _finite_mag(ref_cast(b, r.dtype)))

def _ref_matmul(a: Ref, b: Ref) -> Ref:
  d = least_upper_dtype(a.dtype, b.dtype)
  a, b = ref_cast(a, d), ref_cast(b, d)
  k = a.val.shape[-1]
  with np.errstate(all="ignore"):
    if not dtypes.is_float(d):
      if d == dtypes.bool: r = (a.val.astype(np.int64) @ b.val.astype(np.int64)) != 0
      else:
        wide = np.uint64 if dtypes.is_unsigned(d) else np.int64
        r = (a.val.astype(wide) @ b.val.astype(wide)).astype(d.np)
      ua, ub = (a.err > 0).astype(np.float64), (b.err > 0).astype(np.float64)   # any unknown term spoils the dot product
      return _exact(r, ua @ np.ones(b.err.shape) + np.ones(a.err.shape) @ ub, d)
    aa, ab = np.abs(a.val), np.abs(b.val)
    prop = aa @ b.err + a.err @ ab + a.err @ b.err + k * eps(d) * (aa @ ab)
    return _finish(a.val @ b.val, prop, d)

def reference(root: Node) -> Ref:
  """Evaluate the graph with numpy, each node once."""
  memo: dict[int, Ref] = {}
  def ev(n: Node) -> Ref:
    if id(n) in memo: return memo[id(n)]
    s = [ev(c) for c in n.srcs]
    a = n.arg
    if n.op == "input":
      v = make_input(n.shape, n.dtype.name, *a)
      r = Ref(fround(v, n.dtype), np.zeros(n.shape), n.dtype) if dtypes.is_float(n.dtype) else Ref(v, np.zeros(n.shape), n.dtype)
    elif n.op == "unary": r = ref_unary(a, s[0])
    elif n.op == "binary": r = ref_binary(a, *s)
    elif n.op == "cmp": r = ref_cmp(a, *s)
    elif n.op == "where": r = ref_where(*s)
    elif n.op == "cast": r = ref_cast(s[0], a)
    elif n.op == "reduce": r = ref_reduce(a[0], a[1], a[2], s[0])
    elif n.op == "matmul": r = ref_matmul(*s)
    elif n.op == "contiguous": r = s[0]
    else:
      move = {"reshape": lambda x: x.reshape(a), "permute": lambda x: x.transpose(a), "flip": lambda x: np.flip(x, a) if a else x,
              "pad": lambda x: np.pad(x, a), "shrink": lambda x: x[tuple(slice(b, e) for b, e in a)],
              "expand": lambda x: np.broadcast_to(x, a), "slice": lambda x: x[tuple(slice(b, e, st) for b, e, st in a)]}[n.op]
      r = Ref(move(s[0].val), move(s[0].err), s[0].dtype)
    if r.val.shape != n.shape or r.dtype != n.dtype: raise RuntimeError(f"fuzz generator bug: {n} evaluated to {r.val.shape} {r.dtype}")
    memo[id(n)] = r
    return r
  return ev(root)

# ---- comparison
def mismatches(got: np.ndarray, ref: Ref) -> tuple[np.ndarray, np.ndarray]:
  """(mask of wrong elements, tolerance used): unknown elements never count."""
  known = np.isfinite(ref.err)
  if not dtypes.is_float(ref.dtype): return known & (got != ref.val), np.zeros(ref.val.shape)
  g, r = got.astype(np.float64), ref.val
  tol = ref.err + eps(ref.dtype) * np.where(np.isfinite(r), np.abs(r), 0) + tiny(ref.dtype)
  with np.errstate(all="ignore"):
    ok = (np.isnan(g) & np.isnan(r)) | (g == r) | (np.abs(g - r) <= tol)
  return known & ~ok, tol

def check_graph(root: Node) -> None:
  """Run `root` on tinycore's default device and on the reference; raise AssertionError with a repro on a mismatch."""
  ref = reference(root)
  code = to_code(root)[0]
  try: got, got_dt = run_tinycore(root)
  except Exception as e:
    raise AssertionError(f"tinycore raised {type(e).__name__}: {e}\n--- repro:\n{code}") from e
  problems = []
  if got_dt != ref.dtype: problems.append(f"dtype {got_dt} != expected {ref.dtype}")
  if got.shape != ref.val.shape: problems.append(f"shape {got.shape} != expected {ref.val.shape}")
  else:
    bad, tol = mismatches(got, ref)
    if bad.any():
      idx = np.argwhere(bad)[:5]
      rows = "\n".join(f"  at {tuple(int(i) for i in ix)}: got {got[tuple(ix)]!r}, expected {ref.val[tuple(ix)]!r} (tolerance {tol[tuple(ix)]:.3g})"
                       for ix in idx)
      problems.append(f"{int(bad.sum())} of {bad.size} elements wrong ({int(np.isfinite(ref.err).sum())} checkable):\n{rows}")
  if problems: raise AssertionError("; ".join(problems) + f"\n--- repro:\n{code}")
