"""A validator for UOp graphs: `verify(sink, stage)` checks that a graph is well-formed for a pipeline stage and raises
SpecError naming the offending node and the rule it breaks. Stages: "tensor" (lazy graph with shapes), "kernel" (a
lowered kernel: INDEX/LOAD/STORE over RANGEs) and "program" (a linearized list of UOps)."""
from __future__ import annotations
from typing import Callable, Iterable
from tinycore.uop import UOp, Ops, GroupOp, render_expr
from tinycore.dtype import dtypes, DType, PtrDType
from tinycore.helpers import prod

STAGES = ("tensor", "kernel", "program")

class SpecError(ValueError):
  def __init__(self, u: UOp, rule: str, stage: str):
    try: expr = render_expr(u)
    except Exception: expr = "<unprintable>"
    if len(expr) > 200: expr = expr[:200] + "..."
    self.uop, self.rule, self.stage = u, rule, stage
    super().__init__(f"{stage} spec: {rule}\n  at {u.op.name} dtype={u.dtype} arg={u.arg!r} src=({', '.join(s.op.name for s in u.src)})\n"
                     f"  expr: {expr}")

def _isint(d: DType) -> bool: return dtypes.is_int(d) and not isinstance(d, PtrDType)
def _isbool(d: DType) -> bool: return d.scalar() == dtypes.bool and not isinstance(d, PtrDType)

# ---- per-op checks: each returns None when fine, else the rule that fails
def _const(u: UOp, stage: str) -> str | None:
  if u.src and not (len(u.src) == 1 and u.src[0].op is Ops.DEVICE): return "CONST sources must be () or (DEVICE,)"
  d, v = u.dtype, u.arg
  if d.count > 1 and isinstance(v, tuple):
    if len(v) != d.count: return f"vector CONST needs {d.count} values, has {len(v)}"
    vals = v
  else: vals = (v,)
  for x in vals:
    if _isbool(d) and not isinstance(x, bool): return f"a bool CONST needs a python bool, got {type(x).__name__}"
    if dtypes.is_int(d):
      if not isinstance(x, int) or isinstance(x, bool): return f"an int CONST needs a python int, got {type(x).__name__}"
      if not dtypes.min(d) <= x <= dtypes.max(d): return f"CONST {x} out of the range of {d}"
    if dtypes.is_float(d) and not isinstance(x, float): return f"a float CONST needs a python float, got {type(x).__name__}"
  if d == dtypes.void: return "CONST can't be void"
  return None

_ARITY = {**{o: 1 for o in GroupOp.Unary}, **{o: 2 for o in GroupOp.Binary}, **{o: 3 for o in GroupOp.Ternary}}
def _alu(u: UOp, stage: str) -> str | None:
  op, s = u.op, u.src
  if len(s) != _ARITY[op]: return f"{op.name} takes {_ARITY[op]} sources, got {len(s)}"
  if op is Ops.WHERE:
    if not _isbool(s[0].dtype): return f"WHERE condition must be bool, got {s[0].dtype}"
    if not (s[1].dtype == s[2].dtype == u.dtype): return f"WHERE branches and output must agree: {s[1].dtype}, {s[2].dtype} -> {u.dtype}"
    return None
  if op in GroupOp.Comparison:
    if u.dtype.scalar() != dtypes.bool: return f"{op.name} must output bool, got {u.dtype}"
    if s[0].dtype != s[1].dtype: return f"{op.name} sources must agree: {s[0].dtype} vs {s[1].dtype}"
    if s[0].dtype.count != u.dtype.count: return f"{op.name} output width {u.dtype.count} != source width {s[0].dtype.count}"
    return None
  if op in (Ops.SHL, Ops.SHR):
    if not _isint(u.dtype) or s[0].dtype != u.dtype or not _isint(s[1].dtype): return f"{op.name} needs int operands of the output dtype"
    return None
  if op is Ops.THREEFRY: return None if all(x.dtype == u.dtype for x in s) else "THREEFRY sources must match the output dtype"
  for x in s:
    if x.dtype != u.dtype: return f"{op.name} source dtype {x.dtype} != output dtype {u.dtype}"
  if op in (Ops.IDIV, Ops.MOD) and not _isint(u.dtype): return f"{op.name} is integer only, got {u.dtype}"
  if op in (Ops.AND, Ops.OR, Ops.XOR) and not (_isint(u.dtype) or _isbool(u.dtype)): return f"{op.name} needs int or bool, got {u.dtype}"
  if op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.FDIV) and not dtypes.is_float(u.dtype):
    return f"{op.name} is float only, got {u.dtype}"
  return None

def _cast(u: UOp, stage: str) -> str | None:
  if len(u.src) != 1: return f"{u.op.name} takes one source"
  if u.op is Ops.BITCAST and u.src[0].dtype.itemsize * u.src[0].dtype.count != u.dtype.itemsize * u.dtype.count:
    return f"BITCAST between different sizes: {u.src[0].dtype} -> {u.dtype}"
  return None

def _define_var(u: UOp, stage: str) -> str | None:
  a = u.arg
  if u.src or not (isinstance(a, tuple) and len(a) == 3 and isinstance(a[0], str)): return "DEFINE_VAR needs arg (name, min, max) and no sources"
  if not _isint(u.dtype): return f"a Variable must be an int, got {u.dtype}"
  if not a[1] <= a[2]: return f"Variable {a[0]!r} has min {a[1]} > max {a[2]}"
  return None

def _bind(u: UOp, stage: str) -> str | None:
  if len(u.src) != 2 or u.src[0].op is not Ops.DEFINE_VAR or u.src[1].op is not Ops.CONST: return "BIND needs (DEFINE_VAR, CONST)"
  _, lo, hi = u.src[0].arg
  if not lo <= u.src[1].arg <= hi: return f"bound value {u.src[1].arg} is outside [{lo}, {hi}]"
  return None

def _sink(u: UOp, stage: str) -> str | None: return None if u.dtype == dtypes.void else "SINK must be void"

# kernel level
_PTR_DEFS = (Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL, Ops.DEFINE_REG)
def _define_ptr(u: UOp, stage: str) -> str | None:
  if u.op is Ops.DEFINE_REG and not isinstance(u.dtype, PtrDType): return None  # a scalar accumulator (linearizer)
  if not isinstance(u.dtype, PtrDType): return f"{u.op.name} must have a pointer dtype, got {u.dtype}"
  want = {Ops.DEFINE_GLOBAL: "global", Ops.DEFINE_LOCAL: "local", Ops.DEFINE_REG: "reg"}[u.op]
  if u.dtype.addrspace != want: return f"{u.op.name} pointer must be in {want} memory, is {u.dtype.addrspace}"
  return None

def _index(u: UOp, stage: str) -> str | None:
  if len(u.src) not in (2, 3): return f"INDEX takes (buffer, index[, valid]), got {len(u.src)} sources"
  b = u.src[0]
  if b.op not in _PTR_DEFS or not isinstance(b.dtype, PtrDType):
    return f"INDEX's buffer must be a DEFINE_GLOBAL/LOCAL/REG pointer, got {b.op.name} {b.dtype}"
  if not _isint(u.src[1].dtype): return f"INDEX's index must be an int, got {u.src[1].dtype}"
  if len(u.src) == 3 and not _isbool(u.src[2].dtype): return f"INDEX's valid must be bool, got {u.src[2].dtype}"
  return None

def _load(u: UOp, stage: str) -> str | None:
  if not u.src: return "LOAD needs an address"
  a = u.src[0]
  if a.op is not Ops.INDEX and not isinstance(a.dtype, PtrDType): return f"LOAD's first source must be an INDEX, got {a.op.name}"
  base = a.dtype.base if isinstance(a.dtype, PtrDType) else a.dtype
  if u.dtype.scalar() != base.scalar(): return f"LOAD dtype {u.dtype} doesn't match the buffer's {base}"
  return None

def _store(u: UOp, stage: str) -> str | None:
  if len(u.src) < 2: return "STORE needs (address, value)"
  a, v = u.src[0], u.src[1]
  if a.op is not Ops.INDEX and not isinstance(a.dtype, PtrDType): return f"STORE's first source must be an INDEX, got {a.op.name}"
  base = a.dtype.base if isinstance(a.dtype, PtrDType) else a.dtype
  if v.dtype.scalar() != base.scalar(): return f"STORE of {v.dtype} into a buffer of {base}"
  if u.dtype != dtypes.void: return "STORE must be void"
  return None

def _range(u: UOp, stage: str) -> str | None:
  if len(u.src) != 1: return "RANGE takes one source (its bound)"
  if not _isint(u.src[0].dtype): return f"RANGE bound must be an int, got {u.src[0].dtype}"
  if not _isint(u.dtype): return f"RANGE must be an int, got {u.dtype}"
  return None

def _reduce(u: UOp, stage: str) -> str | None:
  if u.arg not in (Ops.ADD, Ops.MUL, Ops.MAX): return f"REDUCE op must be ADD/MUL/MAX, got {u.arg}"
  if not u.src or any(r.op is not Ops.RANGE for r in u.src[1:]): return "REDUCE takes (value, *RANGEs)"
  if u.src[0].dtype != u.dtype: return f"REDUCE of {u.src[0].dtype} can't output {u.dtype}"
  return None

def _special(u: UOp, stage: str) -> str | None: return None if _isint(u.dtype) else f"SPECIAL must be an int, got {u.dtype}"

# tensor level: movement args against shapes (symbolic dims are checked where they are ints)
def _ints(xs) -> bool: return all(isinstance(x, int) for x in xs)
def _movement(u: UOp, stage: str) -> str | None:
  if len(u.src) != 1: return f"{u.op.name} takes one source"
  s = u.src[0].shape
  if s is None: return f"{u.op.name} of a node without a shape ({u.src[0].op.name})"
  a, n = u.arg, len(s)
  if not isinstance(a, tuple): return f"{u.op.name} arg must be a tuple"
  if u.op is Ops.RESHAPE:
    if _ints(a) and any(x < 0 for x in a): return f"RESHAPE to negative dims {a}"
    if _ints(a) and _ints(s) and prod(a) != prod(s): return f"RESHAPE {s} -> {a} changes the element count"
  elif u.op is Ops.PERMUTE:
    if sorted(a) != list(range(n)): return f"PERMUTE {a} is not a permutation of {n} axes"
  elif len(a) != n: return f"{u.op.name} arg has {len(a)} entries for {n} dims"
  elif u.op is Ops.EXPAND:
    for x, y in zip(s, a):
      if isinstance(x, int) and isinstance(y, int) and x != y and x != 1: return f"EXPAND {s} -> {a}: only 1-sized dims expand"
  elif u.op is Ops.PAD:
    for p in a:
      if not (isinstance(p, tuple) and len(p) == 2) or (_ints(p) and min(p) < 0): return f"PAD arg {a} needs nonnegative (before, after) pairs"
  elif u.op is Ops.SHRINK:
    for p, x in zip(a, s):
      if not (isinstance(p, tuple) and len(p) == 2): return f"SHRINK arg {a} needs (begin, end) pairs"
      if _ints(p) and isinstance(x, int) and not 0 <= p[0] <= p[1] <= x: return f"SHRINK {a} is outside the shape {s}"
  elif u.op is Ops.FLIP:
    if not all(isinstance(f, bool) for f in a): return f"FLIP arg {a} must be bools"
  return None

def _reduce_axis(u: UOp, stage: str) -> str | None:
  if not (isinstance(u.arg, tuple) and len(u.arg) == 2): return "REDUCE_AXIS arg must be (op, axes)"
  s = u.src[0].shape
  if s is not None and any(not 0 <= ax < len(s) for ax in u.arg[1]): return f"REDUCE_AXIS axes {u.arg[1]} out of range for shape {s}"
  return None

def _multi(u: UOp, stage: str) -> str | None:
  # one shard per device, on that device, split like numpy.array_split on `axis` (or all alike when replicated)
  from tinycore.uop import shard_bounds
  if not (isinstance(u.arg, tuple) and len(u.arg) == 2 and isinstance(u.arg[1], tuple)): return "MULTI arg must be (axis, devices)"
  axis, devices = u.arg
  if len(u.src) != len(devices): return f"MULTI has {len(u.src)} shards for {len(devices)} devices"
  if (on := tuple(s.device for s in u.src)) != devices: return f"MULTI shards are on {on}, not {devices}"
  shapes = [s.shape for s in u.src]
  if any(x is None for x in shapes): return "MULTI of a node without a shape"
  if axis is None: return None if len(set(shapes)) == 1 else f"replicated MULTI shards have different shapes {shapes}"
  if not 0 <= axis < len(shapes[0]): return f"MULTI axis {axis} out of range for shards of shape {shapes[0]}"
  if len({x[:axis] + x[axis + 1:] for x in shapes}) != 1: return f"MULTI shards {shapes} differ off the axis {axis}"
  sizes = [x[axis] for x in shapes]
  if not _ints(sizes) or sizes != [e - b for b, e in shard_bounds(sum(sizes), len(devices))]: return f"MULTI shard sizes {sizes} aren't an even split"
  return None

def _mselect(u: UOp, stage: str) -> str | None:
  devices = u.src[0].device
  if not (isinstance(u.arg, tuple) and len(u.arg) == 2): return "MSELECT arg must be (index, axis)"
  if not isinstance(devices, tuple) or not 0 <= u.arg[0] < len(devices): return f"MSELECT {u.arg[0]} of a value on {devices}"
  return None

def _elementwise_shapes(u: UOp, stage: str) -> str | None:
  shapes = [x.shape for x in u.src if x.shape is not None]
  if len(set(shapes)) > 1: return f"{u.op.name} sources have different shapes {shapes}"
  return None

_COMMON: dict[Ops, Callable] = {Ops.CONST: _const, Ops.DEFINE_VAR: _define_var, Ops.BIND: _bind, Ops.SINK: _sink, Ops.CAST: _cast, Ops.BITCAST: _cast,
                                **{o: _alu for o in GroupOp.ALU}}
_KERNEL: dict[Ops, Callable] = {Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store, Ops.RANGE: _range, Ops.REDUCE: _reduce,
                                Ops.SPECIAL: _special, **{o: _define_ptr for o in _PTR_DEFS}}
_TENSOR: dict[Ops, Callable] = {**{o: _movement for o in GroupOp.Movement}, Ops.REDUCE_AXIS: _reduce_axis, Ops.MULTI: _multi, Ops.MSELECT: _mselect}
_TENSOR_ONLY = GroupOp.Movement | {Ops.REDUCE_AXIS, Ops.COPY, Ops.CONTIGUOUS, Ops.ASSIGN, Ops.BUFFER, Ops.MULTI, Ops.MSELECT}
_KERNEL_ONLY = {Ops.INDEX, Ops.LOAD, Ops.STORE, Ops.RANGE, Ops.END, Ops.REDUCE, Ops.SPECIAL, Ops.BARRIER, Ops.DEFINE_LOCAL}

def verify(sink: UOp | Iterable[UOp], stage: str = "kernel") -> bool:
  """Check every node of `sink` (a UOp, or the list of a linearized program) against the rules of `stage`."""
  if stage not in STAGES: raise ValueError(f"unknown spec stage {stage!r}, expected one of {STAGES}")
  if stage == "program":
    _verify_program(list(sink))  # type: ignore[arg-type]
    return True
  table = {**_COMMON, **(_KERNEL if stage == "kernel" else _TENSOR)}
  for u in sink.toposort():  # type: ignore[union-attr]
    if stage == "kernel" and u.op in _TENSOR_ONLY: raise SpecError(u, f"{u.op.name} is a tensor-level op and can't appear in a kernel", stage)
    if stage == "tensor" and u.op in _KERNEL_ONLY: raise SpecError(u, f"{u.op.name} is a kernel-level op and can't appear in a tensor graph", stage)
    if (fn := table.get(u.op)) is not None and (why := fn(u, stage)) is not None: raise SpecError(u, why, stage)
    if stage == "tensor" and u.op in GroupOp.Elementwise and (why := _elementwise_shapes(u, stage)) is not None: raise SpecError(u, why, stage)
  if stage == "kernel": _check_dangling(sink)  # type: ignore[arg-type]
  return True

def _check_dangling(sink: UOp):
  """A reduce's RANGE may only be used beneath that REDUCE: past it, the loop no longer exists."""
  open_: dict[UOp, frozenset] = {}
  owned: dict[UOp, UOp] = {}
  for u in sink.toposort():
    d = frozenset().union(*[open_[s] for s in u.src]) if u.src else frozenset()
    if u.op is Ops.RANGE: d = d | {u}
    if u.op is Ops.REDUCE:
      for r in u.src[1:]:
        if r in owned and owned[r] is not u: raise SpecError(u, f"RANGE {r.arg} is reduced by two REDUCEs", "kernel")
        owned[r] = u
      d = d - set(u.src[1:])
    open_[u] = d
  if not (stray := [r for r in open_[sink] if r in owned]): return
  # name the node that reads the range directly, on a path from the sink that bypasses the REDUCE
  r, u = stray[0], sink
  while r not in u.src: u = next(s for s in u.src if r in open_[s])
  raise SpecError(u, f"uses RANGE {r.arg} outside the REDUCE that closes it", "kernel")

def _verify_program(uops: list[UOp]):
  """A linearized program: every source defined before use, and RANGE/END properly nested."""
  seen: set[UOp] = set()
  loops: list[UOp] = []
  for u in uops:
    for s in u.src:
      # an END refers back to its RANGE; a DEFINE_REG names the REDUCE it replaces (never emitted itself)
      if s not in seen and s.op is not Ops.CONST and not (u.op is Ops.DEFINE_REG and s.op is Ops.REDUCE):
        raise SpecError(u, f"uses a {s.op.name} before it is defined", "program")
    if u.op is Ops.RANGE: loops.append(u)
    if u.op is Ops.END:
      if not loops or u.src[0] is not loops[-1]: raise SpecError(u, "END doesn't close the innermost open RANGE", "program")
      loops.pop()
    seen.add(u)
  if loops: raise SpecError(loops[-1], "RANGE is never closed by an END", "program")
