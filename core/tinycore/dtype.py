"""dtypes: scalar, vector and pointer types, and the promotion lattice."""
from __future__ import annotations
import builtins, math, struct, functools
from dataclasses import dataclass
from typing import Literal, Union
from tinycore import helpers as _h
from tinycore.helpers import ContextVar

AddrSpace = Literal["global", "local", "reg"]

@dataclass(frozen=True, eq=True)
class DType:
  priority: int      # order used to break ties in promotion
  itemsize: int      # bytes per scalar
  name: str
  fmt: str | None    # struct/memoryview format char (None for types numpy/struct lack)
  count: int = 1     # vector width
  _scalar: DType | None = None
  def __repr__(self): return f"dtypes.{self.name}" if self.count == 1 else f"dtypes.{self.scalar().name}.vec({self.count})"
  # dtypes are dict keys on the hot path of UOp construction: hash once
  def __hash__(self):
    try: return self.__dict__["_h"]
    except KeyError: object.__setattr__(self, "_h", h := hash((self.priority, self.itemsize, self.name, self.count, self._scalar))); return h
  # the generated dataclass __eq__ builds two field tuples per call; dtype comparisons are on every rewrite's hot path
  def __eq__(self, o):
    if self is o: return True
    return type(o) is type(self) and (self.priority, self.itemsize, self.name, self.fmt, self.count, self._scalar) == \
      (o.priority, o.itemsize, o.name, o.fmt, o.count, o._scalar)
  def __ne__(self, o):
    r = self.__eq__(o)
    return r if r is NotImplemented else not r
  def __lt__(self, o: DType): return (self.priority, self.itemsize, self.name) < (o.priority, o.itemsize, o.name)
  @property
  def base(self) -> DType: return self
  @property
  def nbytes_vec(self) -> int: return self.itemsize * self.count
  def scalar(self) -> DType: return self._scalar if self._scalar is not None else self
  @property
  def min(self): return dtypes.min(self)   # dtypes.int.min, as tinygrad spells it
  @property
  def max(self): return dtypes.max(self)
  def vec(self, n: int) -> DType:
    assert self.count == 1, f"can't vectorize {self} again"
    if n == 1 or self == dtypes.void: return self
    return DType(self.priority, self.itemsize, f"{self.name}{n}", None, n, self)
  def ptr(self, size: int = -1, addrspace: AddrSpace = "global") -> PtrDType:
    return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.count, None, self, addrspace, size)
  @property
  def np(self):
    """The numpy dtype for this scalar type (bfloat16/fp8 have none: their bits are exposed as unsigned ints)."""
    import numpy as np
    return np.dtype(_NP_NAMES.get(self.scalar().name, "uint8"))

@dataclass(frozen=True, eq=True)
class PtrDType(DType):
  _base: DType | None = None
  addrspace: AddrSpace = "global"
  size: int = -1     # element count where known (local/register arrays)
  __hash__ = DType.__hash__
  def __repr__(self): return f"{self._base!r}.ptr({self.size}{'' if self.addrspace == 'global' else ', ' + repr(self.addrspace)})"
  @property
  def base(self) -> DType: return self._base
  def vec(self, n): raise TypeError("pointers don't vectorize here")
  def ptr(self, size=-1, addrspace="global"): raise TypeError("no pointers to pointers")

_NP_NAMES = {"bool": "bool", "char": "int8", "short": "int16", "int": "int32", "long": "int64", "uchar": "uint8", "ushort": "uint16",
             "uint": "uint32", "ulong": "uint64", "half": "float16", "float": "float32", "double": "float64", "index": "int32", "bfloat16": "uint16",
             "fp8e4m3": "uint8", "fp8e5m2": "uint8"}

class dtypes:
  void = DType(-1, 0, "void", None)
  bool = DType(0, 1, "bool", "?")
  int8 = DType(1, 1, "char", "b")
  uint8 = DType(2, 1, "uchar", "B")
  int16 = DType(3, 2, "short", "h")
  uint16 = DType(4, 2, "ushort", "H")
  int32 = DType(5, 4, "int", "i")
  uint32 = DType(6, 4, "uint", "I")
  int64 = DType(7, 8, "long", "q")
  uint64 = DType(8, 8, "ulong", "Q")
  fp8e4m3 = DType(9, 1, "fp8e4m3", None)
  fp8e5m2 = DType(10, 1, "fp8e5m2", None)
  float16 = DType(11, 2, "half", "e")
  bfloat16 = DType(12, 2, "bfloat16", None)
  float32 = DType(13, 4, "float", "f")
  float64 = DType(14, 8, "double", "d")
  # aliases users know
  half, float, double, char, uchar, short, ushort = float16, float32, float64, int8, uint8, int16, uint16
  int, uint, long, ulong = int32, uint32, int64, uint64
  default_float: DType = float32
  default_int: DType = int32
  # the index type of generated kernels: an unbounded integer while codegen reasons about it (constants never wrap, value
  # ranges are exact); the renderer gives it 32 or 64 bits per kernel (codegen/index_width.py), so its range is int64's
  index = DType(100, 4, "index", "i")

  @staticmethod
  def is_float(x: DType) -> builtins.bool: return x.scalar() in _FLOATS
  @staticmethod
  def is_int(x: DType) -> builtins.bool: return x.scalar() in _INTS
  @staticmethod
  def is_unsigned(x: DType) -> builtins.bool: return x.scalar() in _UINTS
  @staticmethod
  def is_bool(x: DType) -> builtins.bool: return x.scalar() == dtypes.bool
  @staticmethod
  def from_py(x) -> DType:
    if isinstance(x, (list, tuple)): return max((dtypes.from_py(v) for v in x), default=dtypes.default_float)
    if isinstance(x, bool): return dtypes.bool
    if isinstance(x, int): return dtypes.default_int
    if isinstance(x, float): return dtypes.default_float
    raise TypeError(f"can't infer a dtype from {type(x).__name__} {x!r}")
  @staticmethod
  def from_np(npdtype) -> DType:
    import numpy as np
    name = np.dtype(npdtype).name
    if name not in _FROM_NP: raise TypeError(f"numpy dtype {name} has no tinycore equivalent")
    return _FROM_NP[name]
  @staticmethod
  def as_const(val, dtype: DType):
    """Python value of a constant of `dtype` (wraps ints like the hardware would)."""
    if isinstance(val, tuple): return tuple(dtypes.as_const(v, dtype) for v in val)
    if dtypes.is_bool(dtype): return bool(val)
    if dtypes.is_int(dtype):
      if isinstance(val, float) and (math.isinf(val) or math.isnan(val)): return 0
      if dtype == dtypes.index: return int(val)   # index math is exact: no wrap at 32 bits (see dtypes.index)
      v, bits = int(val), dtype.itemsize * 8
      v &= (1 << bits) - 1
      return v - (1 << bits) if not dtypes.is_unsigned(dtype) and v >= 1 << (bits - 1) else v
    return float(val)
  @staticmethod
  def min(dtype: DType):
    if dtype == dtypes.index: return -2 ** 63
    if dtypes.is_int(dtype): return 0 if dtypes.is_unsigned(dtype) else -2 ** (dtype.itemsize * 8 - 1)
    return -math.inf if dtypes.is_float(dtype) else False
  @staticmethod
  def max(dtype: DType):
    if dtype == dtypes.index: return 2 ** 63 - 1
    if dtypes.is_int(dtype): return 2 ** (dtype.itemsize * 8) - 1 + dtypes.min(dtype)
    return math.inf if dtypes.is_float(dtype) else True
  @staticmethod
  def finfo(dtype: DType) -> tuple[builtins.int, builtins.int]:
    """(exponent bits, mantissa bits) of a float type."""
    if not dtypes.is_float(dtype): raise TypeError(f"{dtype} is not a float")
    return {dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7), dtypes.float32: (8, 23), dtypes.float64: (11, 52),
            dtypes.fp8e4m3: (4, 3), dtypes.fp8e5m2: (5, 2)}[dtype.scalar()]
  @staticmethod
  def fields() -> dict[str, DType]: return _BY_NAME

# sets, not tuples: membership is a hash lookup instead of a scan of dataclass comparisons
_FLOATS = frozenset((dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64))
_UINTS = frozenset((dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64))
_INTS = frozenset((dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.index)) | _UINTS
_BY_NAME = {k: v for k, v in vars(dtypes).items()
            if isinstance(v, DType) and not k.startswith("_") and k not in ("default_float", "default_int", "index")}
_FROM_NP = {"bool": dtypes.bool, "int8": dtypes.int8, "uint8": dtypes.uint8, "int16": dtypes.int16, "uint16": dtypes.uint16, "int32": dtypes.int32,
            "uint32": dtypes.uint32, "int64": dtypes.int64, "uint64": dtypes.uint64, "float16": dtypes.float16, "float32": dtypes.float32,
            "float64": dtypes.float64}

class UnknownDTypeError(TypeError, AttributeError):
  """A dtype name or object we don't know. A TypeError in our terms, and an AttributeError where tinygrad code expects
  one (its lookup is getattr(dtypes, name))."""

def to_dtype(x: Union[DType, str]) -> DType:
  if isinstance(x, DType): return x
  if isinstance(x, str) and x in _BY_NAME: return _BY_NAME[x]
  try: return dtypes.from_np(x)
  except Exception: raise UnknownDTypeError(f"unknown dtype {x!r}; known: {', '.join(sorted(_BY_NAME))}") from None

# promotion lattice (PyTorch/JAX style): an edge a -> b means a promotes safely to b
_LATTICE: dict[DType, tuple[DType, ...]] = {
  dtypes.bool: (dtypes.int8, dtypes.uint8), dtypes.int8: (dtypes.int16,), dtypes.int16: (dtypes.int32,), dtypes.int32: (dtypes.int64,),
  dtypes.int64: (dtypes.fp8e4m3, dtypes.fp8e5m2), dtypes.uint8: (dtypes.int16, dtypes.uint16), dtypes.uint16: (dtypes.int32, dtypes.uint32),
  dtypes.uint32: (dtypes.int64, dtypes.uint64), dtypes.uint64: (dtypes.fp8e4m3, dtypes.fp8e5m2),
  dtypes.fp8e4m3: (dtypes.float16, dtypes.bfloat16), dtypes.fp8e5m2: (dtypes.float16, dtypes.bfloat16),
  dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,), dtypes.float32: (dtypes.float64,), dtypes.float64: ()}

@functools.cache
def _upper_set(d: DType) -> frozenset[DType]:
  return frozenset([d]).union(*[_upper_set(x) for x in _LATTICE[d]])

def least_upper_dtype(*ds: DType) -> DType:
  """The smallest dtype every argument promotes to (int + float -> the float, int8 + uint8 -> int16, half + bfloat16 -> float)."""
  return min(frozenset.intersection(*[_upper_set(d.scalar()) for d in ds]))

def least_upper_float(d: DType) -> DType: return d if dtypes.is_float(d) else least_upper_dtype(d, dtypes.default_float)

def sum_acc_dtype(d: DType) -> DType:
  """Accumulator dtype of a sum, as torch does: small ints to int32/uint32 at least, floats to at least float32 precision upcast kept."""
  if dtypes.is_unsigned(d): return least_upper_dtype(d, dtypes.uint32)
  if dtypes.is_int(d) or d == dtypes.bool: return least_upper_dtype(d, dtypes.int32)
  return d

DEFAULT_FLOAT = ContextVar("DEFAULT_FLOAT", "")
def _apply_default_float(kw: dict):
  if "DEFAULT_FLOAT" in kw or kw is None:
    name = (str(DEFAULT_FLOAT.value).strip() or "float32").lower()
    known = {"half": dtypes.float16, "bfloat16": dtypes.bfloat16, "float32": dtypes.float32, "float": dtypes.float32,
             "float64": dtypes.float64, "double": dtypes.float64, "float16": dtypes.float16}
    if name not in known:   # a typo must not silently leave float32 in place
      from tinycore.helpers import EnvError
      raise EnvError(f"environment variable DEFAULT_FLOAT={DEFAULT_FLOAT.value!r}: expected one of "
                     f"{', '.join(k.upper() for k in known)}, or unset it")
    dtypes.default_float = known[name]
_h._context_hooks.append(_apply_default_float)
if DEFAULT_FLOAT.value: _apply_default_float({"DEFAULT_FLOAT": 1})

# truncation of python values to a dtype, used by constant folding
def truncate(dtype: DType, x):
  if dtypes.is_float(dtype):
    if dtype.scalar() == dtypes.float32:
      if not math.isfinite(x): return x
      return struct.unpack("f", struct.pack("f", x))[0] if abs(x) < 3.4028235e38 else math.copysign(math.inf, x)
    if dtype.scalar() == dtypes.float16:
      try: return struct.unpack("e", struct.pack("e", x))[0]
      except OverflowError: return math.copysign(math.inf, x)
    if dtype.scalar() in (dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2):   # no struct format: round through their bits
      import numpy as np
      from tinycore.engine.numeric import bits_to_float, float_to_bits
      with np.errstate(all="ignore"): return float(bits_to_float(float_to_bits(np.array([x], np.float32), dtype.scalar()), dtype.scalar())[0])
    return x
  return dtypes.as_const(x, dtype)
