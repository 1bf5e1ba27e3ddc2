"""The UOp graph: one immutable, hash-consed node type for every stage from Tensor to linearized kernel."""
from __future__ import annotations
import enum, math, weakref, functools
from typing import Any, Callable, cast
from tinycore.dtype import DType, dtypes, PtrDType, truncate
from tinycore.helpers import prod

class Ops(enum.IntEnum):
  # graph roots and metadata
  SINK = enum.auto(); NOOP = enum.auto(); DEVICE = enum.auto(); CUSTOM = enum.auto()
  # data
  BUFFER = enum.auto(); BUFFER_VIEW = enum.auto(); CONST = enum.auto(); DEFINE_VAR = enum.auto(); BIND = enum.auto()
  # tensor level
  COPY = enum.auto(); CONTIGUOUS = enum.auto(); ASSIGN = enum.auto(); REDUCE_AXIS = enum.auto(); DETACH = enum.auto()
  # movement
  RESHAPE = enum.auto(); PERMUTE = enum.auto(); EXPAND = enum.auto(); PAD = enum.auto(); SHRINK = enum.auto(); FLIP = enum.auto()
  # unary
  CAST = enum.auto(); BITCAST = enum.auto(); EXP2 = enum.auto(); LOG2 = enum.auto(); SIN = enum.auto(); SQRT = enum.auto(); RECIP = enum.auto()
  NEG = enum.auto(); TRUNC = enum.auto()
  # binary
  ADD = enum.auto(); MUL = enum.auto(); SUB = enum.auto(); FDIV = enum.auto(); IDIV = enum.auto(); MOD = enum.auto(); MAX = enum.auto()
  CMPLT = enum.auto(); CMPNE = enum.auto(); CMPEQ = enum.auto(); AND = enum.auto(); OR = enum.auto(); XOR = enum.auto()
  SHL = enum.auto(); SHR = enum.auto(); POW = enum.auto(); THREEFRY = enum.auto()
  # ternary
  WHERE = enum.auto(); MULACC = enum.auto()
  # kernel level
  DEFINE_GLOBAL = enum.auto(); DEFINE_LOCAL = enum.auto(); DEFINE_REG = enum.auto(); INDEX = enum.auto(); LOAD = enum.auto(); STORE = enum.auto()
  RANGE = enum.auto(); END = enum.auto(); REDUCE = enum.auto(); SPECIAL = enum.auto(); BARRIER = enum.auto(); IF = enum.auto(); ENDIF = enum.auto()
  WMMA = enum.auto(); VECTORIZE = enum.auto(); GEP = enum.auto()
  # multi-device (tensor level): MULTI joins one shard per device, arg (axis, devices): the shards concatenated on `axis`,
  # or each a full copy when axis is None; MSELECT takes device i's part of a sharded value, arg (i, axis)
  MULTI = enum.auto(); MSELECT = enum.auto()

class GroupOp:
  Unary = {Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.NEG, Ops.TRUNC}
  Binary = {Ops.ADD, Ops.MUL, Ops.SUB, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR,
            Ops.SHL, Ops.SHR, Ops.POW, Ops.THREEFRY}
  Ternary = {Ops.WHERE, Ops.MULACC}
  ALU = Unary | Binary | Ternary
  Elementwise = ALU | {Ops.CAST, Ops.BITCAST}
  Movement = {Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP}
  Commutative = {Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR}
  Associative = {Ops.ADD, Ops.MUL, Ops.AND, Ops.OR, Ops.MAX}
  Comparison = {Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ}
  Idempotent = {Ops.AND, Ops.OR, Ops.MAX}

# python semantics of each ALU op, used by constant folding, the emulator and the reference interpreter
def _idiv(a, b): return (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1) if b != 0 else 0  # C truncation
def _mod(a, b): return a - _idiv(a, b) * b if b != 0 else 0
python_alu: dict[Ops, Callable] = {
  Ops.NEG: lambda x: -x if not isinstance(x, bool) else not x, Ops.EXP2: lambda x: math.inf if x >= 1024 else 2.0 ** x,
  Ops.LOG2: lambda x: math.log2(x) if x > 0 else -math.inf if x == 0 else math.nan, Ops.SIN: lambda x: math.sin(x) if math.isfinite(x) else math.nan,
  Ops.SQRT: lambda x: math.sqrt(x) if x >= 0 else math.nan, Ops.RECIP: lambda x: 1 / x if x != 0 else math.copysign(math.inf, x),
  Ops.TRUNC: lambda x: x if not math.isfinite(x) else float(math.trunc(x)),
  Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b, Ops.IDIV: _idiv, Ops.MOD: _mod,
  Ops.FDIV: lambda a, b: a / b if b != 0 else (math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1, b)),
  Ops.MAX: max, Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b, Ops.CMPEQ: lambda a, b: a == b,
  Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b, Ops.SHL: lambda a, b: a << b, Ops.SHR: lambda a, b: a >> b,
  Ops.POW: lambda a, b: a ** b, Ops.WHERE: lambda c, a, b: a if c else b, Ops.MULACC: lambda a, b, c: a * b + c}

def exec_alu(op: Ops, dtype: DType, operands: tuple) -> Any:
  """Constant-fold one ALU op in python with the result truncated to `dtype`."""
  try: ret = python_alu[op](*operands)
  except (OverflowError, ZeroDivisionError, ValueError): ret = math.nan if dtypes.is_float(dtype) else 0
  return truncate(dtype, ret) if not isinstance(ret, complex) else math.nan

class _Ref(weakref.ref["UOp"]):
  __slots__ = ("key",)
  key: tuple
_uop_cache: dict[tuple, _Ref] = {}
def _evict(ref: _Ref):
  # one hash of the key, not two (get, then del): every node of an eager graph dies through here
  if (cur := _uop_cache.pop(ref.key, None)) is not ref and cur is not None: _uop_cache[ref.key] = cur   # a newer node has the key

class UOpMetaClass(type):
  def __call__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple = (), arg: Any = None):
    key = (op, dtype, src, arg)
    # -0.0 == 0.0, so without this a -0.0 constant would come back as an earlier 0.0 one (1/x then gives +inf)
    if arg.__class__ is float and arg == 0.0 and math.copysign(1.0, arg) < 0: key = (op, dtype, src, "-0.0")
    try: ref = _uop_cache.get(key)
    except TypeError: raise TypeError(f"UOp arg must be hashable, got {type(arg).__name__} for {op}") from None
    if ref is not None and (old := ref()) is not None: return old
    ret: UOp = object.__new__(cls)   # type: ignore[arg-type]   # cls is UOp: this is its metaclass (no typing.cast: a call per node)
    ret.op, ret.dtype, ret.src, ret.arg, ret._cache = op, dtype, src, arg, None
    (r := _Ref(ret, _evict)).key = key
    _uop_cache[key] = r
    return ret

class UOp(metaclass=UOpMetaClass):
  """An immutable node. Building the same (op, dtype, src, arg) twice returns the same object, so `is` is graph equality."""
  __slots__ = ("op", "dtype", "src", "arg", "__weakref__", "_cache")
  _cache: dict | None
  def __init__(self, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None):
    self.op, self.dtype, self.src, self.arg, self._cache = op, dtype, src, arg, None
  @property
  def _c(self) -> dict:
    # derived-property cache, created on first use so that building a node allocates as little as possible
    if self._cache is None: self._cache = {}
    return self._cache
  def __reduce__(self): return UOp, (self.op, self.dtype, self.src, self.arg)
  def replace(self, **kw) -> UOp:
    return UOp(kw.get("op", self.op), kw.get("dtype", self.dtype), kw.get("src", self.src), kw.get("arg", self.arg))
  def __repr__(self): return f"UOp({self.op.name}, {self.dtype}, arg={self.arg!r}, src=({', '.join(s.op.name for s in self.src)}))"
  def pretty(self) -> str: return pretty(self)

  # ---- graph walks (iterative: graphs can be deeper than python's recursion limit)
  def toposort(self) -> list[UOp]:
    if (r := self._c.get("toposort")) is not None: return r
    visited: dict[UOp, None] = {}
    stack: list[tuple[UOp, bool]] = [(self, False)]
    while stack:
      n, expanded = stack.pop()
      if n in visited: continue
      if expanded: visited[n] = None
      else:
        stack.append((n, True))
        stack.extend((s, False) for s in reversed(n.src) if s not in visited)
    self._c["toposort"] = r = list(visited)
    return r
  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    new: dict[UOp, UOp] = {}
    for n in self.toposort():
      if n in mapping: new[n] = mapping[n]
      else:
        src = tuple(new[s] for s in n.src)
        new[n] = n if src == n.src else n.replace(src=src)
    return new[self]

  # ---- tensor-level properties
  @property
  def shape(self) -> tuple | None:
    if (c := self._cache) is None or "shape" not in c: return _fill(self, "shape", _shape)
    return c["shape"]
  @property
  def size(self) -> int: return prod(self.shape)
  @property
  def ndim(self) -> int: return len(self.shape)
  @property
  def device(self) -> str | tuple[str, ...]:
    if (c := self._cache) is None or "device" not in c: return _fill(self, "device", _device)
    return c["device"]
  @property
  def has_multi(self) -> bool:
    """Whether a sharded value (a MULTI, or something made for a device tuple) is in this graph: it must be lowered to
    per-device graphs before scheduling."""
    if (c := self._cache) is None or "multi" not in c: return _fill(self, "multi", _has_multi)
    return c["multi"]
  @property
  def base(self) -> UOp:
    u = self
    while u.op in GroupOp.Movement: u = u.src[0]
    return u
  @property
  def buffer(self):
    if self.op is not Ops.BUFFER: raise ValueError(f"{self.op} has no buffer")
    return self.arg
  @property
  def is_realized(self) -> bool: return self.op is Ops.BUFFER and self.arg.is_allocated()

  # ---- builders
  @staticmethod
  def const(dtype: DType, b, device: str | tuple[str, ...] | None = None) -> UOp:
    if isinstance(b, UOp): return b.cast(dtype) if b.dtype != dtype else b
    v = dtypes.as_const(b, dtype)
    return UOp(Ops.CONST, dtype, (UOp(Ops.DEVICE, arg=device),) if device is not None else (), v)
  def const_like(self, b) -> UOp:
    """A scalar constant with this node's dtype (and device, at tensor level), broadcast to its shape."""
    if self.op in (Ops.DEFINE_VAR, Ops.BIND) or self.shape is None or self._is_index: return UOp.const(self.dtype, b)
    c = UOp.const(self.dtype.scalar(), b, self.device)   # a device tuple gives a replicated constant
    return c.reshape((1,) * len(self.shape)).expand(self.shape) if self.shape else c
  @property
  def _is_index(self) -> bool: return self.op not in (Ops.CONST, Ops.BUFFER) and self.op not in GroupOp.Movement and self.shape is None
  def alu(self, op: Ops, *src: UOp) -> UOp:
    out_dtype = dtypes.bool if op in GroupOp.Comparison else (self, *src)[-1].dtype if op is Ops.WHERE else self.dtype
    return UOp(op, out_dtype, (self, *src))
  def _bin(self, op: Ops, x, reverse=False) -> UOp:
    if not isinstance(x, UOp): x = self.const_like(x)
    return x.alu(op, self) if reverse else self.alu(op, x)
  def __add__(self, x): return self._bin(Ops.ADD, x)
  def __radd__(self, x): return self._bin(Ops.ADD, x, True)
  def __sub__(self, x): return self._bin(Ops.SUB, x)
  def __rsub__(self, x): return self._bin(Ops.SUB, x, True)
  def __mul__(self, x): return self._bin(Ops.MUL, x)
  def __rmul__(self, x): return self._bin(Ops.MUL, x, True)
  def __floordiv__(self, x): return self._bin(Ops.IDIV, x)
  def __mod__(self, x): return self._bin(Ops.MOD, x)
  def __truediv__(self, x): return self._bin(Ops.FDIV, x)
  def __neg__(self): return self.alu(Ops.NEG)
  def __and__(self, x): return self._bin(Ops.AND, x)
  def __or__(self, x): return self._bin(Ops.OR, x)
  def __xor__(self, x): return self._bin(Ops.XOR, x)
  def __lshift__(self, x): return self._bin(Ops.SHL, x)
  def __rshift__(self, x): return self._bin(Ops.SHR, x)
  def lt(self, x) -> UOp: return self._bin(Ops.CMPLT, x)
  def ne(self, x) -> UOp: return self._bin(Ops.CMPNE, x)
  def eq(self, x) -> UOp: return self._bin(Ops.CMPEQ, x)
  def maximum(self, x) -> UOp: return self._bin(Ops.MAX, x)
  def where(self, a, b) -> UOp:
    if not isinstance(a, UOp) and not isinstance(b, UOp): raise TypeError("where needs at least one UOp branch")
    a = a if isinstance(a, UOp) else b.const_like(a)
    b = b if isinstance(b, UOp) else a.const_like(b)
    return UOp(Ops.WHERE, a.dtype, (self, a, b))
  def cast(self, dtype: DType) -> UOp: return self if self.dtype == dtype else UOp(Ops.CAST, dtype, (self,))
  def bitcast(self, dtype: DType) -> UOp: return UOp(Ops.BITCAST, dtype, (self,))
  def sink(self, *srcs: UOp) -> UOp: return UOp(Ops.SINK, dtypes.void, (self, *srcs))
  def load(self, *src: UOp, dtype: DType | None = None) -> UOp: return UOp(Ops.LOAD, dtype or self.dtype.base, (self, *src))
  def store(self, val: UOp, *src: UOp) -> UOp: return UOp(Ops.STORE, dtypes.void, (self, val, *src))
  def index(self, idx: UOp, valid: UOp | None = None) -> UOp:
    return UOp(Ops.INDEX, self.dtype, (self, idx) if valid is None else (self, idx, valid))
  def gep(self, i: int) -> UOp: return UOp(Ops.GEP, self.dtype.scalar(), (self,), (i,))

  # movement ops (tensor level); the args are checked by the Tensor frontend, where errors are in the user's terms
  def reshape(self, shape: tuple) -> UOp: return self if self.shape == tuple(shape) else UOp(Ops.RESHAPE, self.dtype, (self,), tuple(shape))
  def permute(self, order: tuple[int, ...]) -> UOp:
    return self if tuple(order) == tuple(range(len(order))) else UOp(Ops.PERMUTE, self.dtype, (self,), tuple(order))
  def expand(self, shape: tuple) -> UOp: return self if self.shape == tuple(shape) else UOp(Ops.EXPAND, self.dtype, (self,), tuple(shape))
  def pad(self, arg: tuple[tuple[int, int], ...]) -> UOp:
    return self if all(b == 0 and e == 0 for b, e in arg) else UOp(Ops.PAD, self.dtype, (self,), tuple(arg))
  def shrink(self, arg: tuple[tuple[int, int], ...]) -> UOp:
    return self if all(b == 0 and e == s for (b, e), s in zip(arg, self.shape)) else UOp(Ops.SHRINK, self.dtype, (self,), tuple(arg))
  def flip(self, axes: tuple[bool, ...]) -> UOp: return self if not any(axes) else UOp(Ops.FLIP, self.dtype, (self,), tuple(axes))
  def r(self, op: Ops, axes: tuple[int, ...]) -> UOp:
    if (shape := self.shape) is not None: axes = tuple(sorted([a for a in axes if shape[a] != 1]))
    else: axes = tuple(axes)
    return self if not axes else UOp(Ops.REDUCE_AXIS, self.dtype, (self,), (op, axes))

  # ---- symbolic: variables and value ranges
  @staticmethod
  def variable(name: str, min_val: int, max_val: int, dtype: DType = dtypes.index) -> UOp:
    return UOp(Ops.DEFINE_VAR, dtype, (), (name, min_val, max_val))
  @property
  def expr(self) -> str:
    if self.op is Ops.BIND: return self.src[0].arg[0]
    return self.arg[0]
  def bind(self, val: int) -> UOp:
    if self.op is not Ops.DEFINE_VAR: raise TypeError(f"only a Variable can be bound, not {self.op}")
    if not self.arg[1] <= val <= self.arg[2]:
      raise ValueError(f"{val} is out of the bounds [{self.arg[1]}, {self.arg[2]}] of Variable {self.arg[0]!r}")
    return UOp(Ops.BIND, self.dtype, (self, UOp.const(self.dtype, val)))
  def unbind(self) -> tuple[UOp, int]:
    if self.op is not Ops.BIND: raise TypeError(f"{self.op} is not bound")
    return self.src[0], self.src[1].arg
  @property
  def val(self) -> int: return self.unbind()[1]
  @property
  def vmin(self): return self._min_max[0]
  @property
  def vmax(self): return self._min_max[1]
  @property
  def _min_max(self) -> tuple:
    # sources first, iteratively (deep expressions don't recurse), and only the ones without a range yet: a full
    # toposort per new node made every rewrite of a long chain walk the whole chain again (quadratic)
    if (c := self._cache) is None or (r := c.get("mm")) is None: return _fill(self, "mm", _min_max)
    return r
  def simplify(self) -> UOp:
    from tinycore.symbolic import symbolic
    from tinycore.rewrite import graph_rewrite
    return graph_rewrite(self, symbolic)
  def ssimplify(self):
    """Simplify, and return a python int when the result is a constant."""
    r = self.simplify()
    return r.arg if r.op is Ops.CONST else r
  def render(self) -> str: return render_expr(self)
  def __bool__(self): raise TypeError(f"the truth value of a symbolic UOp is unknown: {render_expr(self)}")
  def __int__(self):
    if self.op is Ops.CONST: return int(self.arg)
    raise TypeError(f"{render_expr(self)} is not a constant")

Variable = UOp.variable

def sint_to_uop(x) -> UOp: return x if isinstance(x, UOp) else UOp.const(dtypes.index, x)
def index_const(x: int) -> UOp: return UOp.const(dtypes.index, x)
def ssimplify(x): return x.ssimplify() if isinstance(x, UOp) else x
def smax(*xs):
  if all(isinstance(x, int) for x in xs): return max(xs)
  return functools.reduce(lambda a, b: sint_to_uop(a).maximum(b).ssimplify(), xs)
def resolve(x, default: bool = True) -> bool:
  """A python bool from a maybe-symbolic comparison: the value range decides, else `default`."""
  if not isinstance(x, UOp): return bool(x)
  if x.dtype != dtypes.bool: raise TypeError(f"resolve needs a bool, got {x.dtype}")
  lo, hi = x.simplify()._min_max
  return bool(lo) if lo == hi else default

def shard_bounds(size: int, n: int) -> list[tuple[int, int]]:
  """[start, end) of each of n shards of an axis of `size`, split like numpy.array_split (the first size % n get one more)."""
  if not isinstance(size, int): raise ValueError(f"can't shard an axis of symbolic size {size}")
  if size < n: raise ValueError(f"can't shard an axis of size {size} over {n} devices: a shard would be empty")
  q, r = divmod(size, n)
  starts = [i * q + min(i, r) for i in range(n + 1)]
  return list(zip(starts[:-1], starts[1:]))

def _fill(u: UOp, key: str, fn: Callable[[UOp], Any]) -> Any:
  """Cache fn(n) under `key` for u and every source that lacks it, sources first: iterative, so long chains don't recurse.
  Returns u's value."""
  # the common case, a node just built on sources that have it: no walk
  for s in u.src:
    if s._cache is None or key not in s._cache: break
  else:
    if u._cache is None: u._cache = {}
    u._cache[key] = r = fn(u)
    return r
  stack = [u]
  while stack:
    n = stack[-1]
    if n._cache is not None and key in n._cache: stack.pop(); continue
    ready = True
    for s in n.src:
      if s._cache is None or key not in s._cache:
        stack.append(s)
        ready = False
    if not ready: continue
    n._c[key] = fn(n)
    stack.pop()
  return u._c[key]

def _has_multi(u: UOp) -> bool:
  return u.op is Ops.MULTI or (u.op in (Ops.DEVICE, Ops.COPY) and isinstance(u.arg, tuple)) or any(s._c["multi"] for s in u.src)

_OWN_DEVICE = {Ops.DEVICE, Ops.BUFFER, Ops.COPY, Ops.MULTI, Ops.MSELECT}   # ops that say where they are; others inherit
def _device(u: UOp) -> str | tuple[str, ...] | None:
  if u.op not in _OWN_DEVICE:
    for s in u.src:
      if (d := s.device) is not None: return d
    return None
  if u.op is Ops.DEVICE: return u.arg
  if u.op is Ops.BUFFER: return u.arg.device
  if u.op is Ops.COPY: return u.arg
  if u.op is Ops.MULTI: return u.arg[1]
  return u.src[0].device[u.arg[0]]   # MSELECT

# ---- shape inference at tensor level
_INHERIT_SHAPE = GroupOp.Elementwise | {Ops.CONTIGUOUS, Ops.COPY, Ops.ASSIGN, Ops.DETACH, Ops.BUFFER_VIEW}
def _shape(u: UOp) -> tuple | None:
  op = u.op
  if op in _INHERIT_SHAPE:   # first: the most common op at tensor level (and each `Ops.X` below is a lookup)
    for s in u.src:
      if (shape := s.shape) is not None: return shape
    return None
  if op is Ops.MULTI:
    axis, shp = u.arg[0], u.src[0].shape
    return shp if axis is None else shp[:axis] + (sum(s.shape[axis] for s in u.src),) + shp[axis + 1:]
  if op is Ops.MSELECT:
    (i, axis), shp = u.arg, u.src[0].shape
    if axis is None: return shp
    b, e = shard_bounds(shp[axis], len(u.src[0].device))[i]
    return shp[:axis] + (e - b,) + shp[axis + 1:]
  if op is Ops.BUFFER: return (u.arg.size,)
  if op is Ops.DEFINE_GLOBAL: return (cast(PtrDType, u.dtype).size,)
  if op is Ops.CONST: return () if u.src else None
  if op is Ops.BIND: return ()   # a bound Variable used as a tensor value is a scalar
  if op is Ops.DEFINE_VAR: return None
  if op is Ops.RESHAPE or op is Ops.EXPAND: return u.arg
  if op is Ops.PERMUTE: return tuple(u.src[0].shape[i] for i in u.arg)
  if op is Ops.PAD: return tuple(s + b + e for s, (b, e) in zip(u.src[0].shape, u.arg))
  if op is Ops.SHRINK: return tuple(e - b if isinstance(e, int) and isinstance(b, int) else ssimplify(e - b) for b, e in u.arg)
  if op is Ops.FLIP: return u.src[0].shape
  if op is Ops.REDUCE_AXIS: return tuple(1 if i in u.arg[1] else s for i, s in enumerate(u.src[0].shape))
  if op is Ops.CUSTOM and u.arg and isinstance(u.arg, tuple) and u.arg[0] == "custom_kernel": return u.src[0].shape
  if op is Ops.CUSTOM and hasattr(u.arg, "out_shape"): return u.arg.out_shape   # a fused kernel (codegen/attention.py)
  return None

# ---- value ranges of integer/bool expressions, the basis of the symbolic rules
# Bounds are python ints (unbounded). Index math (dtypes.index) is exact, so its range is whatever the arithmetic gives
# (codegen then picks a 32- or 64-bit index type that holds it); a fixed-width int wraps, so a range that leaves its
# dtype is unknown: the whole dtype.
def _min_max(u: UOp) -> tuple:
  lo, hi = _min_max_exact(u)
  if u.dtype != dtypes.index and u.dtype in _FIXED_INTS and (lo < dtypes.min(u.dtype) or hi > dtypes.max(u.dtype)):
    return (dtypes.min(u.dtype), dtypes.max(u.dtype))
  return (lo, hi)
_FIXED_INTS = frozenset((dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64))

def _min_max_exact(u: UOp) -> tuple:
  op, s = u.op, u.src
  if op is Ops.CONST: return (u.arg, u.arg)
  if op is Ops.DEFINE_VAR: return (u.arg[1], u.arg[2])
  if op is Ops.BIND: return s[0]._min_max
  if op is Ops.RANGE: return (0, s[0].vmax - 1)
  if op is Ops.SPECIAL:   # a thread id; one built without its size (hand-written programs) is any id a 32-bit grid has
    return (0, s[0].vmax - 1 if s else u.arg[1] - 1 if len(u.arg) > 1 else 2 ** 31 - 1)
  if op is Ops.CAST and dtypes.is_int(u.dtype) and (dtypes.is_int(s[0].dtype) or s[0].dtype == dtypes.bool):
    lo, hi = s[0]._min_max
    # an int cast wraps (mod 2**bits), it doesn't clamp: char [-1, 0] cast to uchar is {255, 0}, not [0, 0] (which folded
    # the cast to a constant 0). A range that leaves the dtype (or a +-inf bound, from a float compare chain) is the whole dtype.
    if dtypes.min(u.dtype) <= lo and hi <= dtypes.max(u.dtype): return (int(lo), int(hi))
    return (dtypes.min(u.dtype), dtypes.max(u.dtype))
  if len(s) >= 1 and op in GroupOp.ALU and (dtypes.is_int(u.dtype) or u.dtype == dtypes.bool):
    (a0, a1) = s[0]._min_max
    if op is Ops.NEG: return (-a1, -a0) if u.dtype != dtypes.bool else (False, True)
    if len(s) >= 2: (b0, b1) = s[1]._min_max
    if op is Ops.ADD: return (a0 + b0, a1 + b1)
    if op is Ops.SUB: return (a0 - b1, a1 - b0)
    vals: tuple
    if op is Ops.MUL: vals = (a0 * b0, a0 * b1, a1 * b0, a1 * b1); return (min(vals), max(vals))
    if op is Ops.MAX: return (max(a0, b0), max(a1, b1))
    if op is Ops.IDIV and b0 == b1 and b0 != 0:
      vals = (_idiv(a0, b0), _idiv(a1, b0)); return (min(vals), max(vals))
    if op is Ops.IDIV and b0 > 0:
      vals = (_idiv(a0, b0), _idiv(a0, b1), _idiv(a1, b0), _idiv(a1, b1)); return (min(vals), max(vals))
    if op is Ops.MOD and b0 > 0:
      if a0 >= 0: return (0, min(a1, b1 - 1)) if not (a1 - a0 < b0 and a0 % b0 <= a1 % b0 and b0 == b1) else (a0 % b0, a1 % b0)
      return (-(b1 - 1), b1 - 1) if a1 > 0 else (-(b1 - 1), 0)
    if op is Ops.CMPLT: return (a1 < b0, a0 < b1)
    if op is Ops.CMPNE: return ((a0 > b1) or (a1 < b0), not (a0 == a1 == b0 == b1))
    if op is Ops.CMPEQ: return (a0 == a1 == b0 == b1, not ((a0 > b1) or (a1 < b0)))
    if op is Ops.AND and u.dtype == dtypes.bool: return (bool(a0 and b0), bool(a1 and b1))
    if op is Ops.OR and u.dtype == dtypes.bool: return (bool(a0 or b0), bool(a1 or b1))
    if op is Ops.AND and a0 >= 0 and b0 >= 0: return (0, min(a1, b1))
    # OR/XOR of non-negative values never set a bit above the highest either has (a swizzled shared-memory offset)
    if op in (Ops.OR, Ops.XOR) and a0 >= 0 and b0 >= 0: return (0, (1 << max(a1, b1).bit_length()) - 1)
    if op is Ops.SHL and b0 == b1 and a0 >= 0: return (a0 << b0, a1 << b0)
    if op is Ops.SHR and b0 == b1 and a0 >= 0: return (a0 >> b0, a1 >> b0)
    if op is Ops.WHERE:
      (c0, c1), (d0, d1) = s[1]._min_max, s[2]._min_max
      if a0 == a1: return (c0, c1) if a0 else (d0, d1)
      return (min(c0, d0), max(c1, d1))
  if u.dtype.count == 1 and not isinstance(u.dtype, PtrDType) and u.dtype != dtypes.void: return (dtypes.min(u.dtype), dtypes.max(u.dtype))
  return (-math.inf, math.inf)

# ---- printing
_infix = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%", Ops.FDIV: "/", Ops.CMPLT: "<", Ops.CMPNE: "!=",
          Ops.CMPEQ: "==", Ops.AND: "&", Ops.OR: "|", Ops.XOR: "^", Ops.SHL: "<<", Ops.SHR: ">>"}
def render_expr(u: UOp, depth: int = 0) -> str:
  """A readable infix form of an index expression (for errors and DEBUG)."""
  if depth > 40: return "..."
  if u.op is Ops.CONST: return repr(u.arg)
  if u.op is Ops.DEFINE_VAR: return u.arg[0]
  if u.op is Ops.BIND: return f"{u.src[0].arg[0]}={u.src[1].arg}"
  if u.op is Ops.RANGE: return f"r{u.arg[0] if isinstance(u.arg, tuple) else u.arg}"
  if u.op is Ops.SPECIAL: return str(u.arg[0])
  if u.op in _infix: return f"({render_expr(u.src[0], depth+1)}{_infix[u.op]}{render_expr(u.src[1], depth+1)})"
  if u.op is Ops.MAX: return f"max({render_expr(u.src[0], depth+1)}, {render_expr(u.src[1], depth+1)})"
  if u.op is Ops.NEG: return f"(-{render_expr(u.src[0], depth+1)})"
  if u.op is Ops.WHERE: return f"({render_expr(u.src[0], depth+1)} ? {render_expr(u.src[1], depth+1)} : {render_expr(u.src[2], depth+1)})"
  if u.op is Ops.CAST: return f"{u.dtype.name}({render_expr(u.src[0], depth+1)})"
  return f"{u.op.name}({', '.join(render_expr(s, depth+1) for s in u.src)})"

def pretty(u: UOp) -> str:
  lines, ids = [], {}
  for i, n in enumerate(u.toposort()):
    ids[n] = i
    arg = n.arg if n.op is not Ops.BUFFER else f"<buf {n.arg.device} {n.arg.size}>"
    lines.append(f"%{i:<3} {n.op.name:<14} {str(n.dtype):<22} [{', '.join(f'%{ids[s]}' for s in n.src)}] {arg}")
  return "\n".join(lines[-60:]) if len(lines) > 1 else f"UOp({u.op.name}, {u.dtype}, arg={u.arg!r}, src={len(u.src)})"
