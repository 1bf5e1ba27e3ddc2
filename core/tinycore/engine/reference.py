"""A numpy interpreter of the tensor-level UOp graph: the slow, obviously-correct oracle that kernels are checked against."""
from __future__ import annotations
import numpy as np
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import DType, dtypes

def _npdt(d: DType): return np.float32 if d.fmt is None and dtypes.is_float(d) else d.np

def _round_to(x: np.ndarray, d: DType) -> np.ndarray:
  """Values in the precision of `d` (bfloat16/fp8 are simulated in float32)."""
  if d.fmt is None and dtypes.is_float(d):
    from tinycore.engine.numeric import float_to_bits, bits_to_float
    return bits_to_float(float_to_bits(x.astype(np.float32), d), d)
  return x

def _cast(x: np.ndarray, d: DType) -> np.ndarray:
  if dtypes.is_int(d) and x.dtype.kind == "f":
    with np.errstate(invalid="ignore"): x = np.trunc(np.nan_to_num(x, nan=0, posinf=0, neginf=0))
    if dtypes.is_unsigned(d): x = x.astype(np.int64)   # wrap like C's conversion through a wide int
  if d == dtypes.bool: return x.astype(bool)
  return _round_to(x.astype(_npdt(d)), d)

def _alu(op: Ops, d: DType, *s: np.ndarray) -> np.ndarray:
  with np.errstate(all="ignore"):
    if op is Ops.NEG: return -s[0] if s[0].dtype != bool else ~s[0]
    if op is Ops.EXP2: return np.exp2(s[0])
    if op is Ops.LOG2: return np.log2(s[0])
    if op is Ops.SIN: return np.sin(s[0])
    if op is Ops.SQRT: return np.sqrt(s[0])
    if op is Ops.RECIP: return np.reciprocal(s[0])
    if op is Ops.TRUNC: return np.trunc(s[0])
    a, b = s[0], s[1] if len(s) > 1 else None
    if op is Ops.ADD: return a + b if a.dtype != bool else a | b
    if op is Ops.SUB: return a - b
    if op is Ops.MUL: return a * b if a.dtype != bool else a & b
    if op is Ops.FDIV: return a / b
    if op is Ops.IDIV:
      bz = np.where(b == 0, 1, b)
      q = np.abs(a) // np.abs(bz) * np.where((a < 0) != (bz < 0), -1, 1)
      return np.where(b == 0, 0, q).astype(a.dtype)
    if op is Ops.MOD: return np.where(b == 0, 0, np.fmod(a, np.where(b == 0, 1, b))).astype(a.dtype)
    if op is Ops.MAX: return np.maximum(a, b)
    if op is Ops.CMPLT: return a < b
    if op is Ops.CMPNE: return a != b
    if op is Ops.CMPEQ: return a == b
    if op is Ops.AND: return a & b
    if op is Ops.OR: return a | b
    if op is Ops.XOR: return a ^ b
    if op is Ops.SHL: return a << b
    if op is Ops.SHR: return a >> b
    if op is Ops.POW: return a ** b
    if op is Ops.WHERE: return np.where(s[0], s[1], s[2])
    if op is Ops.MULACC: return s[0] * s[1] + s[2]
  raise NotImplementedError(f"reference interpreter has no rule for {op}")

def evaluate(root: UOp, cache: dict | None = None) -> np.ndarray:
  cache = {} if cache is None else cache
  for u in root.toposort():
    if u in cache: continue
    s = [cache[x] for x in u.src]
    op = u.op
    if op is Ops.BUFFER:
      buf = u.arg
      if not buf.is_allocated(): v = np.zeros(buf.size, dtype=_npdt(u.dtype))
      else:
        raw = buf.numpy()
        if u.dtype.fmt is None:
          from tinycore.engine.numeric import bits_to_float
          raw = bits_to_float(raw, u.dtype)
        v = raw
    elif op is Ops.CONST: v = np.array(u.arg, dtype=_npdt(u.dtype)) if u.dtype.count == 1 else None
    elif op is Ops.DEVICE or op is Ops.DEFINE_VAR: v = None
    elif op is Ops.BIND: v = np.array(u.src[1].arg, dtype=np.int32)
    elif op is Ops.RESHAPE: v = s[0].reshape(tuple(int(x) if not isinstance(x, UOp) else x.val for x in u.arg))
    elif op is Ops.PERMUTE: v = s[0].transpose(u.arg)
    elif op is Ops.EXPAND: v = np.broadcast_to(s[0], u.arg)
    elif op is Ops.PAD: v = np.pad(s[0], u.arg)
    elif op is Ops.SHRINK: v = s[0][tuple(slice(b, e) for b, e in u.arg)]
    elif op is Ops.FLIP: v = np.flip(s[0], tuple(i for i, f in enumerate(u.arg) if f))
    elif op is Ops.REDUCE_AXIS:
      rop, axes = u.arg
      fn = {Ops.ADD: np.sum, Ops.MUL: np.prod, Ops.MAX: np.max}[rop]
      v = fn(s[0], axis=axes, keepdims=True)  # type: ignore[operator]
      if s[0].dtype == bool and rop is not Ops.MAX: v = v.astype(bool)
      v = v.astype(s[0].dtype)
    elif op is Ops.CAST: v = _cast(s[0], u.dtype)
    elif op is Ops.BITCAST: v = np.ascontiguousarray(s[0]).view(_npdt(u.dtype))
    elif op in (Ops.CONTIGUOUS, Ops.DETACH, Ops.COPY): v = s[0]
    elif op is Ops.ASSIGN: v = s[1]
    elif op in GroupOp.ALU:
      v = _alu(op, u.dtype, *s)
      v = _round_to(np.asarray(v).astype(_npdt(u.dtype)), u.dtype)
    else: raise NotImplementedError(f"reference interpreter can't evaluate {op}")
    cache[u] = v
  return cache[root]
