"""ALU semantics on numpy lanes, identical to what the C-style renderers emit (see renderer/cstyle.py):
C truncating division with x/0 = 0, MAX that keeps a NaN first operand, half math through float32."""
from __future__ import annotations
import numpy as np
from tinycore.uop import Ops
from tinycore.dtype import DType, dtypes
from tinycore.engine.numeric import float_to_bits, bits_to_float

EMULATED = (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)   # held as float32 in registers, rounded at casts/stores

def reg_np(dt: DType) -> np.dtype:
  """numpy dtype of a register holding `dt` (bf16/fp8 as float32; index as int64)."""
  s = dt.scalar()
  if s in EMULATED: return np.dtype(np.float32)
  if s == dtypes.index: return np.dtype(np.int64)
  return s.np
def mem_np(dt: DType) -> np.dtype:
  """numpy dtype of `dt` in memory (bf16/fp8 as their bits; index as C int)."""
  return np.dtype(np.int32) if dt.scalar() == dtypes.index else dt.scalar().np

def to_mem(x, dt: DType):
  s = dt.scalar()
  if s in EMULATED: return float_to_bits(np.asarray(x, np.float32), s)
  return np.asarray(x).astype(mem_np(s))
def from_mem(x, dt: DType):
  s = dt.scalar()
  if s in EMULATED: return bits_to_float(x, s)
  return x.astype(reg_np(s), copy=False)

def cast(x, src: DType, dt: DType):
  s = dt.scalar()
  if s == dtypes.bool: return np.asarray(x) != 0
  if s in EMULATED: return from_mem(to_mem(x, s), s)   # round to the format, keep as float32
  return np.asarray(x).astype(reg_np(s))
def bitcast(x, src: DType, dt: DType):
  return from_mem(to_mem(x, src).view(mem_np(dt)), dt)

def _idiv(a, b, unsigned: bool):
  bz = b == 0
  bs = np.where(bz, 1, b).astype(np.result_type(a, b))
  q = a // bs
  if not unsigned: q = q + (((a % bs) != 0) & ((a < 0) != (bs < 0)))   # floor -> truncation toward zero
  return np.where(bz, 0, q)
def _mod(a, b, unsigned: bool):
  q = _idiv(a, b, unsigned)
  return np.where(b == 0, 0, a - q * b)

def _math(fn, dt: DType):
  if dt.scalar() == dtypes.float16: return lambda *x: fn(*[np.asarray(v, np.float32) for v in x]).astype(np.float16)   # (_Float16)fnf((float)x)
  return fn

def alu(op: Ops, dt: DType, a: list):
  s = dt.scalar()
  fl, b = dtypes.is_float(s), s == dtypes.bool
  if op is Ops.NEG: return np.logical_not(a[0]) if b else -a[0]
  if op is Ops.EXP2: return _math(np.exp2, s)(a[0])
  if op is Ops.LOG2: return _math(np.log2, s)(a[0])
  if op is Ops.SIN: return _math(np.sin, s)(a[0])
  if op is Ops.SQRT: return _math(np.sqrt, s)(a[0])
  if op is Ops.TRUNC: return np.trunc(a[0]) if fl else a[0]
  if op is Ops.RECIP: return (np.asarray(1, reg_np(s)) / a[0]) if fl else _idiv(np.asarray(1, reg_np(s)), a[0], dtypes.is_unsigned(s))
  if op is Ops.ADD: return (a[0] | a[1]) if b else a[0] + a[1]
  if op is Ops.SUB: return a[0] - a[1]
  if op is Ops.MUL: return (a[0] & a[1]) if b else a[0] * a[1]
  if op is Ops.FDIV: return a[0] / a[1]
  if op is Ops.IDIV: return _idiv(a[0], a[1], dtypes.is_unsigned(s))
  if op is Ops.MOD: return _mod(a[0], a[1], dtypes.is_unsigned(s))
  if op is Ops.MAX: return np.where((a[0] > a[1]) | (a[0] != a[0]), a[0], a[1]) if fl else np.maximum(a[0], a[1])
  if op is Ops.CMPLT: return a[0] < a[1]
  if op is Ops.CMPNE: return a[0] != a[1]
  if op is Ops.CMPEQ: return a[0] == a[1]
  if op is Ops.AND: return a[0] & a[1]
  if op is Ops.OR: return a[0] | a[1]
  if op is Ops.XOR: return a[0] ^ a[1]
  if op is Ops.SHL: return a[0] << a[1]
  if op is Ops.SHR: return a[0] >> a[1]
  if op is Ops.WHERE: return np.where(a[0], a[1], a[2])
  if op is Ops.MULACC: return a[0] * a[1] + a[2]
  if op is Ops.POW: return _math(np.power, s)(a[0], a[1])
  raise NotImplementedError(f"emulator: no ALU op {op.name}")
