"""Dynamic axes as symbolic Variables: a declared dim named `seq` (an ONNX `dim_param`) becomes `Variable("seq", 1, max)`,
so one set of kernels serves every size in the range instead of one compile per size.

An input arrives as a view of a buffer sized for the axis maxima (so a TinyJit capture sees the same buffer size on every
call), shrunk to this call's size and reshaped to the symbolic shape. Sizes computed from it (Shape, the arithmetic after
it) are numpy object arrays holding ints and symbolic UOps (see symbolic_fold.py). An output of symbolic shape is read
back as the first `n` elements of its buffer with the sizes of this call."""
from __future__ import annotations
from typing import Any, Callable
import numpy as np
from tinycore.uop import UOp, Ops, Variable

def is_sym(x) -> bool:
  """A static value holding symbolic sizes (a numpy object array)."""
  return isinstance(x, np.ndarray) and x.dtype == object

def norm_sint(x) -> Any:
  """A size as a plain int where it simplifies to one, else the simplified symbolic UOp."""
  if isinstance(x, UOp):
    r = x.ssimplify()
    return int(r) if isinstance(r, int) else r
  if isinstance(x, (bool, np.bool_)): return bool(x)
  if isinstance(x, (int, np.integer)): return int(x)
  return x

def sym_array(values, shape=None) -> np.ndarray:
  """An object array of sizes; a plain int64 array when nothing in it is symbolic."""
  flat = [norm_sint(v) for v in np.asarray(values, dtype=object).reshape(-1)]
  shp = np.asarray(values, dtype=object).shape if shape is None else shape
  if not any(isinstance(v, UOp) for v in flat):
    if all(isinstance(v, bool) for v in flat) and flat: return np.array(flat, dtype=np.bool_).reshape(shp)
    return np.array(flat, dtype=np.int64).reshape(shp)
  out = np.empty(len(flat), dtype=object)
  out[:] = flat
  return out.reshape(shp)

def sym_arange(n, device: str):
  """0..n-1 as an int64 Tensor for a symbolic n: an arange over n's upper bound, shrunk to n."""
  from tinycore.tensor import Tensor
  from tinycore.dtype import dtypes
  if isinstance(n, int): return Tensor.arange(n, device=device, dtype=dtypes.int64)
  return Tensor.arange(int(n.vmax), device=device, dtype=dtypes.int64).shrink(((0, n),))

def sym_scalar(v, device: str, dtype=None) -> Any:
  """A 0-d Tensor holding a size that may be symbolic (the frontend combines Tensors with bare Variables only)."""
  from tinycore.tensor import Tensor
  from tinycore.dtype import dtypes
  dtype = dtype or dtypes.int64
  if not isinstance(v, UOp): return Tensor(v, device=device, dtype=dtype)
  # added to a 0 on the device: a Tensor of a bare expression has no device, and the frontend refuses to mix it
  zero = Tensor.zeros((), dtype=dtypes.int32, device=device)
  return Tensor(UOp(Ops.ADD, dtypes.int32, (zero.uop, v.cast(dtypes.int32)))).cast(dtype)

def sym_tensor(arr: np.ndarray, ctx) -> Any:
  """A Tensor holding symbolic sizes: the int part uploaded once, each symbolic entry added as one-hot * Variable."""
  flat = arr.reshape(-1)
  ints = np.array([v if isinstance(v, int) else 0 for v in flat], dtype=np.int64)
  t = ctx.tensor(ints)
  for k, v in enumerate(flat):
    if isinstance(v, UOp):
      onehot = np.zeros(len(flat), np.int64); onehot[k] = 1
      t = t + ctx.tensor(onehot) * sym_scalar(v, ctx.device)
  return t.reshape(arr.shape)

def bound_vars(x) -> dict[str, int]:
  """{variable name: bound value} for every BIND in a symbolic size or shape."""
  out: dict[str, int] = {}
  for d in (x if isinstance(x, (tuple, list)) else (x,)):
    if isinstance(d, UOp):
      for u in d.toposort():
        if u.op is Ops.BIND: out[u.src[0].arg[0]] = int(u.src[1].arg)
  return out

_ARITH: dict[Ops, Callable[[int, int], int]] = {Ops.ADD: lambda a, b: a + b, Ops.MUL: lambda a, b: a * b,
                                                Ops.IDIV: lambda a, b: a // b, Ops.MOD: lambda a, b: a % b, Ops.MAX: max}

def _evaluate(d: UOp, values: dict[str, int]) -> int | None:
  """Integer arithmetic over CONST/BIND/DEFINE_VAR evaluated directly (per output per call: a rewrite costs ~1 ms each);
  None for anything else."""
  if d.op is Ops.CONST: return int(d.arg)
  if d.op is Ops.BIND: return values.get(d.src[0].arg[0])
  if d.op is Ops.DEFINE_VAR: return values.get(d.arg[0])
  if d.op in _ARITH and len(d.src) == 2:
    a, b = _evaluate(d.src[0], values), _evaluate(d.src[1], values)
    return None if a is None or b is None or (d.op in (Ops.IDIV, Ops.MOD) and b <= 0) else _ARITH[d.op](a, b)
  return None

def concrete_size(d, values: dict[str, int]) -> int:
  """A symbolic size at the given variable values (BINDs may carry a capture's values: the names decide)."""
  if isinstance(d, int): return d
  if (fast := _evaluate(d, values)) is not None: return fast
  sub = {}
  for u in d.toposort():
    if u.op is Ops.BIND: sub[u] = UOp.const(u.dtype, values[u.src[0].arg[0]])
    elif u.op is Ops.DEFINE_VAR and u.arg[0] in values: sub[u] = UOp.const(u.dtype, values[u.arg[0]])
  r = d.substitute(sub).ssimplify()
  if not isinstance(r, int): raise ValueError(f"output size {d.render()} doesn't reduce to an int with {values}")
  return r

class DynamicAxes:
  """The Variables of a runner's dynamic axes (name -> largest size) and the per-call binding of inputs to them."""
  def __init__(self, maxima: dict[str, int]):
    for name, hi in maxima.items():
      if not isinstance(hi, int) or isinstance(hi, bool) or hi < 1:
        raise ValueError(f"dynamic axis {name!r}: the largest size must be a positive int, got {hi!r}")
    self.maxima = dict(maxima)
    self.vars = {name: Variable(name, 1, hi) for name, hi in maxima.items()}

  def bind(self, name: str, declared: list, arr: np.ndarray, device: str, values: dict[str, int]):
    """A Tensor for input `name` whose dynamic axes are bound Variables, viewing a buffer sized for the maxima.
    `values` collects this call's size per axis name (one name used by two inputs must agree)."""
    from tinycore.tensor import Tensor
    sym_shape: list = []
    max_shape: list[int] = []
    for ax, (d, s) in enumerate(zip(declared, arr.shape)):
      if isinstance(d, str) and d in self.vars:
        hi = self.maxima[d]
        if not 1 <= s <= hi: raise ValueError(f"input {name!r} axis {ax} ({d}) has size {s}, outside the dynamic range 1..{hi}")
        if values.setdefault(d, s) != s:
          raise ValueError(f"input {name!r} axis {ax} ({d}) has size {s}, but another input gave {d}={values[d]}")
        # one row of slack: a Concat along the axis reads one (masked-off) row past it, and the launch-time bounds check
        # proves a kernel safe for every size only from unmasked index ranges; without it each new size is re-checked
        sym_shape.append(self.vars[d].bind(s)); max_shape.append(hi + 1)
      else:
        sym_shape.append(s); max_shape.append(s)
    if all(isinstance(d, int) for d in sym_shape): return Tensor(np.require(arr, requirements='C'), device=device)
    full = np.zeros(int(np.prod(max_shape)), dtype=arr.dtype)
    full[:arr.size] = arr.reshape(-1)   # the call's elements, contiguous at its own sizes: the strides the kernels use
    n = 1
    for d in sym_shape: n = n * d
    # the view built on the uop: the sizes were checked above against the maxima, and the frontend's symbolic checks of
    # the same (a rewrite per size) were half the time of a replayed GPT-2 step
    t = Tensor(full, device=device)
    return t._wrap(t.uop.shrink(((0, n),)).reshape(tuple(sym_shape)))

def read_concrete(t, values: dict[str, int]):
  """A Tensor of concrete shape over the realized buffer of `t` (a Tensor of symbolic shape), without a copy kernel:
  a copy would compile once per size."""
  from tinycore.tensor import Tensor
  shape = tuple(concrete_size(d, values) for d in t.shape)
  if all(isinstance(d, int) for d in t.shape): return t
  t = t.realize()
  u = t.uop
  if not (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER): u = t.contiguous().realize().uop
  buf = u.base.arg
  n = int(np.prod(shape)) if shape else 1
  return Tensor(UOp(Ops.BUFFER, t.dtype, (), buf.view(n, t.dtype, 0)).reshape(shape))
