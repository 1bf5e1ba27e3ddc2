"""Tensor: the user-facing, lazily evaluated array. Every op builds UOps; realize() hands the graph to the engine."""
from __future__ import annotations
import builtins, math, functools, weakref
from typing import Any, Callable, Union
from tinycore.dtype import DType, dtypes, least_upper_dtype, least_upper_float, sum_acc_dtype, to_dtype, truncate
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.helpers import prod, all_int
from tinycore.device import Device, Buffer
from tinycore.tensor_random import RandomMixin
from tinycore.tensor_indexing import IndexingMixin
from tinycore.tensor_movement import MovementMixin
from tinycore.tensor_nn import NNMixin
from tinycore.tensor_linalg import LinalgMixin
from tinycore.tensor_hash import HashMixin
from tinycore.tensor_activation import ActivationMixin
from tinycore.tensor_math import MathMixin
from tinycore.tensor_base import register_tensor_type
from tinycore.tensor_shapes import shape_arg, broadcast_shape
from tinycore.tensor_errors import ArgumentError, DTypeError
from tinycore import tensor_multi as _multi   # multi-device (sharded) tensors: the hooks below are marked "multi:"

def _to_np_dtype(dtype: DType):
  """The numpy dtype a tensor of `dtype` reads back as (tinygrad's name; None where numpy has no such type)."""
  return dtype.np if dtype.fmt is not None else None

sint = Union[int, UOp]
ConstType = Union[float, int, bool]

def _canon_device(device: str | tuple | None) -> str | tuple[str, ...]:
  if isinstance(device, (tuple, list)): return tuple(Device.canonicalize(d) for d in device)
  return Device.canonicalize(device) if device is not None else Device.DEFAULT

def _scalar_dtype_beside(v: ConstType, other: DType) -> DType:
  """The dtype a python scalar takes next to a tensor of dtype `other` (torch's rule): a bool, an int with an int or
  float tensor, a float with a float tensor all take the tensor's dtype (relu of uint8 stays uint8); else the scalar's own."""
  if isinstance(v, bool) or (isinstance(v, int) and not dtypes.is_bool(other)) or (isinstance(v, float) and dtypes.is_float(other)): return other
  return dtypes.from_py(v)

def _scalar(v: ConstType, dt: DType, device: str) -> UOp:
  """A 0-d tensor's value, as its dtype holds it: Tensor(1.1, dtype=dtypes.fp8e4m3) is 1.125, like a 1-element tensor."""
  return UOp.const(dt, truncate(dt, float(v)) if dtypes.is_float(dt) else v, device)

# TinyJit: called with (Buffer, the C-contiguous host array) for every upload from host data, while a call is observed
upload_observers: list = []

def _from_np(x, device: str, dtype: DType | None) -> UOp:
  import numpy as np
  if x.dtype.kind not in "biuf" or x.dtype.name == "float128": raise TypeError(f"numpy dtype {x.dtype} is not supported by Tensor")
  dt = dtype or dtypes.from_np(x.dtype)
  if dtype is not None and dtype.fmt is not None and dtypes.from_np(x.dtype) != dtype: x = x.astype(dtype.np)
  elif dtype is not None and dtype.fmt is None:  # bfloat16/fp8: convert through float32 bits
    from tinycore.engine.numeric import float_to_bits
    x = float_to_bits(x.astype(np.float32), dtype)
  x = np.require(x, requirements="C")
  buf = Buffer(device, max(x.size, 0), dt)
  if x.size: buf.allocate().copyin(memoryview(x.reshape(-1).view(np.uint8)))
  for obs in upload_observers: obs(buf, x)
  return UOp(Ops.BUFFER, dt, (), buf).reshape(x.shape)

def _scalar_dtype(v, dtype: DType | None) -> DType:
  """The dtype of a tensor made from the Python scalar `v`. An int too big for the default int takes int64 (then
  uint64) instead of silently wrapping; one that fits no integer dtype, or not the one asked for, is an OverflowError
  (as in torch and numpy)."""
  if isinstance(v, bool) or not isinstance(v, int): return dtype or dtypes.from_py(v)
  if dtype is None:
    dtype = next((d for d in (dtypes.default_int, dtypes.int64, dtypes.uint64) if dtypes.min(d) <= v <= dtypes.max(d)), None)
    if dtype is None: raise OverflowError(f"Python int {v} is out of range for int64 and uint64")
  elif dtypes.is_int(dtype) and not dtypes.min(dtype) <= v <= dtypes.max(dtype):
    raise OverflowError(f"value {v} doesn't fit in {dtype} (range {dtypes.min(dtype)}..{dtypes.max(dtype)})")
  return dtype

def _list_to_np(data, dt: DType, explicit: bool):
  """A nested list as a numpy array of `dt`; with no dtype asked for, ints past the default int widen (int64, then
  uint64) rather than overflow."""
  import numpy as np
  ladder = [dt] if explicit or not dtypes.is_int(dt) else [d for d in (dt, dtypes.int64, dtypes.uint64) if d.itemsize >= dt.itemsize]
  for i, d in enumerate(ladder):
    try: return np.array(data, dtype=d.np if d.fmt else np.float32), d
    except OverflowError as e:
      if i == len(ladder) - 1: raise OverflowError(f"list values out of range for {d}: {e}") from None

class Tensor(RandomMixin, IndexingMixin, MovementMixin, NNMixin, ActivationMixin, MathMixin, LinalgMixin, HashMixin):
  """A lazily evaluated multi-dimensional array on a device, with autograd. This class holds construction, realization,
  the elementwise core, reductions and autograd; the other ops live by concern in the mixins (tensor_movement, tensor_indexing,
  tensor_linalg, tensor_nn, tensor_activation, tensor_math, tensor_random, tensor_hash), which reach Tensor only through
  tensor_base."""
  __slots__ = ("uop", "_requires_grad", "grad", "__weakref__")
  _requires_grad: bool | None   # behind the requires_grad property (set at the end of this file)
  training: bool = False
  no_grad: bool = False

  def __init__(self, data: Any = None, device: str | tuple | None = None, dtype: DType | str | None = None, requires_grad: bool | None = None):
    dtype = to_dtype(dtype) if dtype is not None else None
    device = _canon_device(device) if device is not None or not isinstance(data, UOp) else None   # a UOp knows its device
    multi_dev = None
    if isinstance(device, tuple) and not isinstance(data, UOp): multi_dev, device = device, device[0]   # multi: build on the first, replicate below
    if isinstance(data, UOp): u = data
    elif data is None: u = _empty(device, (0,), dtype or dtypes.default_float)
    elif isinstance(data, (bool, int, float)): u = _scalar(data, _scalar_dtype(data, dtype), device)
    elif isinstance(data, bytes): u = _from_np(__import__("numpy").frombuffer(data, dtype="uint8"), device, dtype or dtypes.uint8)
    elif isinstance(data, (list, tuple)):
      import numpy as np
      dt = dtype or dtypes.from_py(data)
      try: arr, dt = _list_to_np(data, dt, explicit=dtype is not None)
      except ValueError as e: raise ValueError(f"can't make a Tensor from a ragged or non-numeric list: {e}") from None
      if arr.dtype == object: raise ValueError("can't make a Tensor from a ragged list")
      u = _from_np(arr, device, dt)
    elif type(data).__module__ == "numpy" or hasattr(data, "__array__"):
      import numpy as np
      arr = np.asarray(data)
      u = _from_np(arr, device, dtype) if arr.shape else _scalar(arr.item(), dtype or dtypes.from_np(arr.dtype), device)
    elif isinstance(data, Tensor): u = data.uop if dtype is None else data.cast(dtype).uop
    else: raise TypeError(f"can't make a Tensor from {type(data).__name__}")
    if dtype is not None and u.dtype != dtype: u = u.cast(dtype)
    if multi_dev is not None or (u.base.op is Ops.BUFFER and isinstance(u.base.arg.device, tuple)):
      u = _multi.on_tensor(u, multi_dev)   # multi: replicate
    self.uop: UOp = u
    self.requires_grad: bool | None = requires_grad   # type: ignore[misc]   # a property, set on the class below
    self.grad: Tensor | None = None

  # ---- properties
  @property
  def shape(self) -> tuple[sint, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def device(self) -> str | tuple[str, ...]: return self.uop.device
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> sint: return prod(self.shape)
  @property
  def max_shape(self) -> tuple[int, ...]:
    """The shape with every symbolic dimension replaced by its maximum."""
    return tuple(s.vmax if isinstance(s, UOp) else s for s in self.shape)
  def max_numel(self) -> int: return prod(self.max_shape)
  def is_floating_point(self) -> bool: return dtypes.is_float(self.dtype)
  def size(self, dim: int | None = None): return self.shape if dim is None else self.shape[self._resolve_dim(dim)]
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.element_size()
  def __len__(self):
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]
  @property
  def T(self) -> Tensor: return self.transpose()
  def __repr__(self): return f"<Tensor {self.shape} {self.dtype} on {self.device}{' with grad' if self.grad is not None else ''}>"
  def __hash__(self): return id(self)
  def __bool__(self):
    if self.numel() != 1: raise ValueError(f"the truth value of a Tensor with shape {self.shape} is ambiguous")
    return bool(self.item())

  # ---- realization
  def schedule(self, *lst: Tensor) -> list:
    from tinycore.engine.schedule import create_schedule
    from tinycore.engine.multi import lower_targets
    from tinycore.engine.realize import tensor_stage
    return create_schedule(tensor_stage(lower_targets([t.uop for t in (self, *lst)])[0]))   # multi: sharded graphs lowered to per-device ones
  def realize(self, *lst: Tensor, do_update_stats=True) -> Tensor:
    from tinycore.engine.realize import realize_uops
    if not lst:
      self.uop = realize_uops([self.uop])[0]
      return self
    ts = (self, *lst)
    new = realize_uops([t.uop for t in ts])
    for t, u in zip(ts, new): t.uop = u
    return self
  def is_realized(self) -> bool: return all(u.base.op is Ops.BUFFER for u in _multi.parts(self.uop))   # multi: every shard
  def _buffer(self) -> Buffer:
    # a pending assign runs once, here, and afterwards self reads its result; any other lazy graph stays (gradients use it)
    if self.uop.op is Ops.ASSIGN: self.realize()
    if isinstance(self.device, tuple): return self.to(self.device[0])._buffer()   # multi: gather onto the first device
    u = self.uop.src[0] if self.uop.op is Ops.RESHAPE else self.uop
    if u.op is not Ops.BUFFER or u.arg.size != self.numel(): u = self.contiguous().realize().uop.base
    return u.arg
  def data(self) -> memoryview:
    if not all_int(self.shape): raise ValueError(f"can't read a tensor of symbolic shape {self.shape}")
    if 0 in self.shape: return memoryview(bytearray(0)).cast(self.dtype.fmt or "B")
    mv = self._buffer().as_buffer()
    return mv.cast(self.dtype.fmt or "B", self.shape if self.shape else None) if self.dtype.fmt else mv
  def numpy(self):
    import numpy as np
    if not all_int(self.shape): raise ValueError(f"can't read a tensor of symbolic shape {self.shape}")
    if 0 in self.shape: return np.zeros(self.shape, dtype=self.dtype.np if self.dtype.fmt else np.float32)
    arr = self._buffer().numpy()
    if self.dtype.fmt is None:
      from tinycore.engine.numeric import bits_to_float
      arr = bits_to_float(arr, self.dtype)
    return arr.reshape(self.shape)
  def tolist(self): return self.numpy().tolist()
  def item(self):
    if self.numel() != 1: raise ValueError(f"item() needs a tensor with one element, this one has shape {self.shape}")
    return self.numpy().reshape(-1)[0].item()
  def clone(self) -> Tensor: return Tensor(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)), requires_grad=self.requires_grad)
  def contiguous(self) -> Tensor: return self._wrap(UOp(Ops.CONTIGUOUS, self.dtype, (self.uop,)))
  def contiguous_backward(self) -> Tensor: return self
  def detach(self) -> Tensor: return Tensor(UOp(Ops.DETACH, self.dtype, (self.uop,)), requires_grad=False)
  def to(self, device: str | tuple | None) -> Tensor:
    device = _canon_device(device)
    if device == self.device: return self
    if isinstance(device, tuple): return self.shard(device)
    return self._wrap(UOp(Ops.COPY, self.dtype, (self.uop,), device))
  def shard_like(self, y: Tensor) -> Tensor:
    """Shard like `y`: its devices and axis (a single-device `y` moves this tensor to its device)."""
    if (like := _multi.shard_like(y.uop)) is not None: return self.shard(*like)   # multi: y's devices and axis
    return self.to(y.device)
  def shard(self, devices: tuple | list, axis: int | None = None) -> Tensor:
    """Split along `axis` over `devices` (axis=None: a full copy on each). Semantics and limits: tensor_multi.py."""
    axis = self._resolve_dim(axis) if axis is not None else None
    return self._wrap(_multi.shard(self.uop, _canon_device(tuple(devices)), axis))
  def shard_(self, devices: tuple | list, axis: int | None = None) -> Tensor:
    self.uop = self.shard(devices, axis).uop
    return self
  def to_(self, device) -> Tensor:
    self.uop = self.to(device).uop
    return self
  def assign(self, x) -> Tensor:
    x = x if isinstance(x, Tensor) else Tensor(x, device=self.device, dtype=self.dtype)
    if x.shape != self.shape: raise ValueError(f"assign shape mismatch: target {self.shape}, value {x.shape}")
    if x.dtype != self.dtype: raise TypeError(f"assign dtype mismatch: target {self.dtype}, value {x.dtype}")
    if x.device != self.device: x = x.to(self.device)
    if self.uop.base.op is not Ops.BUFFER and _multi.shard_buffers(self.uop) is None: self.uop = x.uop; return self   # multi: shards in place
    from tinycore.engine.assign_once import fresh
    self.uop = fresh(self.uop, x.uop)
    return self
  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise ValueError(f"replace shape mismatch: {self.shape} vs {x.shape}")
    self.uop = x.uop
    return self

  def _wrap(self, u: UOp) -> Tensor:
    """A new tensor from a UOp computed from this one; gradients flow when this one needs them."""
    return _derived(u, True if self._requires_grad else None)

  # ---- creation
  @staticmethod
  def empty(*shape, device=None, dtype=None, **kw) -> Tensor:
    return Tensor(_empty(_canon_device(device), shape_arg(shape), to_dtype(dtype) if dtype else dtypes.default_float), **kw)
  @staticmethod
  def from_blob(ptr: int, shape: tuple[int, ...], **kwargs) -> Tensor:
    """A tensor over `prod(shape)` elements at address `ptr` on `device` (default: the default device), without copying or
    taking ownership: the memory must outlive the tensor. `dtype`/`device` pick the type and device; other kwargs go to Tensor."""
    dt, dev = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float), _canon_device(kwargs.pop("device", None))
    if not isinstance(ptr, int) or ptr <= 0: raise ValueError(f"from_blob needs a non-null integer address, got {ptr!r}")
    shape = shape_arg((shape,) if isinstance(shape, int) else shape)
    buf = Buffer(dev, prod(shape), dt, opaque=ptr)
    if isinstance(sizes := getattr(buf.allocator, "sizes", None), dict): sizes[ptr] = buf.nbytes   # CPU's zero-copy host view needs the size
    return Tensor(UOp(Ops.BUFFER, dt, (), buf).reshape(shape), **kwargs)
  @staticmethod
  def from_url(url: str, gunzip: bool = False, **kwargs) -> Tensor:
    """The bytes at `url` (http(s), file, ...) as a 1-D uint8 tensor, gzip-extracted if `gunzip`; a `dtype` reinterprets them."""
    import urllib.request, gzip
    with urllib.request.urlopen(url) as r: data = r.read()
    if gunzip: data = gzip.decompress(data)
    dt = to_dtype(kwargs.pop("dtype", None) or dtypes.uint8)
    if len(data) % dt.itemsize: raise ValueError(f"from_url: {len(data)} bytes from {url} aren't a whole number of {dt} ({dt.itemsize} bytes)")
    import numpy as np
    arr = np.frombuffer(data, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize])   # same-size bitcast below
    return Tensor(arr, **kwargs).bitcast(dt)
  @staticmethod
  def full(shape, fill_value: ConstType, device=None, dtype=None, **kw) -> Tensor:
    shape = shape_arg((shape,) if hasattr(shape, "__index__") or isinstance(shape, UOp) else shape)
    c = UOp.const(_scalar_dtype(fill_value, to_dtype(dtype) if dtype else None), fill_value, _canon_device(device))
    return Tensor(c.reshape((1,) * len(shape)).expand(shape), **kw)
  @staticmethod
  def zeros(*shape, **kw) -> Tensor:
    fill = 0.0 if "dtype" not in kw or kw["dtype"] is None else 0
    return Tensor.full(shape_arg(shape), fill, **{**kw, "dtype": kw.get("dtype") or dtypes.default_float})
  @staticmethod
  def ones(*shape, **kw) -> Tensor: return Tensor.full(shape_arg(shape), 1, **{**kw, "dtype": kw.get("dtype") or dtypes.default_float})
  def full_like(self, fill_value, **kw) -> Tensor:
    return Tensor.full(self.shape, fill_value, **{"dtype": self.dtype, "device": self.device, **kw})
  def const_like(self, b, dtype=None) -> Tensor:
    """A constant with this tensor's shape, device and (unless given) dtype, broadcast: no memory."""
    return Tensor(b, dtype=dtype or self.dtype, device=self.device)._expand_to(self.shape)
  def zeros_like(self, **kw) -> Tensor: return self.full_like(0, **kw)
  def ones_like(self, **kw) -> Tensor: return self.full_like(1, **kw)
  def empty_like(self, **kw) -> Tensor: return Tensor.empty(*self.shape, **{"dtype": self.dtype, "device": self.device, **kw})
  @staticmethod
  def arange(start, stop=None, step=1, **kw) -> Tensor:
    if stop is None: start, stop = 0, start
    if step == 0: raise ArgumentError("arange step must not be 0")
    n = max(math.ceil((stop - start) / step), 0)
    explicit = kw.get("dtype")
    ints = all(isinstance(x, int) for x in (start, stop, step))
    lo, hi = sorted((start, start + (n - 1) * step)) if n else (start, start)
    dt = to_dtype(kw.pop("dtype")) if kw.get("dtype") is not None else dtypes.default_int if ints else dtypes.default_float
    kw.pop("dtype", None)
    # an int range past the default int widens to int64; one past an asked-for int dtype is an error, not a silent wrap
    if ints and explicit is None and not dtypes.min(dt) <= lo <= hi <= dtypes.max(dt): dt = dtypes.int64
    if dtypes.is_int(dt) and not dtypes.min(dt) <= lo <= hi <= dtypes.max(dt):
      raise OverflowError(f"arange({start}, {stop}, {step}) has values {lo}..{hi}, outside {dt}'s range {dtypes.min(dt)}..{dtypes.max(dt)}")
    if n == 0: return Tensor.empty(0, dtype=dt, **kw)
    # start + i*step over the index range (elementwise, no buffer)
    idx = Tensor._index_range(n, kw.get("device"))
    return (idx.cast(dt) * step + start).cast(dt)   # in dt itself: an int64 range must not pass through int32
  @staticmethod
  def _index_range(n: int, device=None) -> Tensor:
    """[0, 1, ..., n-1] as int32 with no buffer and O(n log n) elementwise work: the sum of bit_j * 2^j, where bit_j is
    the two-element [0, 1] (a padded constant) broadcast over a (2,)*k reshape. A pooled cumsum would cost O(n^2)."""
    if n <= 1: return Tensor.full((n,), 0, dtype=dtypes.int32, device=device)
    k = (n - 1).bit_length()
    two = Tensor.full((1,), 1, dtype=dtypes.int32, device=device).pad(((1, 0),))
    out = None
    for j in range(k):
      t = (two * (1 << j)).reshape(tuple(2 if i == k - 1 - j else 1 for i in range(k))).expand((2,) * k)
      out = t if out is None else out + t
    return out.reshape(1 << k).shrink(((0, n),))
  @staticmethod
  def eye(n: int, m: int | None = None, **kw) -> Tensor:
    m = n if m is None else m
    dt = kw.pop("dtype", None) or dtypes.default_float
    r = Tensor._index_range(n, kw.get("device")).reshape(n, 1)
    c = Tensor._index_range(m, kw.get("device")).reshape(1, m)
    return Tensor((r == c).cast(dt).uop, requires_grad=kw.get("requires_grad"))
  def _broadcast_const(self, x, dtype=None) -> Tensor:
    return Tensor(UOp.const(dtype or self.dtype, x, self.device))   # multi: a device tuple makes a replicated const

  # ---- elementwise
  def _broadcasted(self, y, reverse=False, match_dtype=True) -> tuple[Tensor, Tensor]:
    x: Tensor = self
    # a python scalar beside a tensor of its dtype on one device: the broadcast const straight from the uop (the general
    # path below builds and validates three Tensors for it, ~10 us per op of eager overhead)
    if y.__class__ in (int, float, bool) and (c := _scalar_beside(x.uop, y)) is not None:
      ct = _derived(c, None)
      return (ct, x) if reverse else (x, ct)
    if not isinstance(y, Tensor):
      if isinstance(y, UOp) and y.op in (Ops.BIND, Ops.DEFINE_VAR):
        y = Tensor(y.cast(dtypes.int32) if y.dtype != dtypes.int32 else y, device=x.device)
      else:
        if not isinstance(y, (bool, int, float)): raise TypeError(f"can't combine a Tensor with {type(y).__name__}")
        y = Tensor(UOp.const(_scalar_dtype_beside(y, x.dtype), y, x.device))   # multi: a device tuple makes a replicated const
    elif y.device != x.device: raise ValueError(f"tensors are on different devices: {x.device} and {y.device}")
    if reverse: x, y = y, x
    out_shape = broadcast_shape(x.shape, y.shape)
    if match_dtype:
      dt = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(dt), y.cast(dt)
    return x._expand_to(out_shape), y._expand_to(out_shape)
  def _expand_to(self, shape) -> Tensor:
    if self.shape == shape: return self
    return self.reshape((1,) * (len(shape) - self.ndim) + self.shape).expand(shape)
  def _apply(self, op: Ops, *others: Tensor, dtype: DType | None = None) -> Tensor:
    if len(others) == 1:   # a binary op, the common case, spelled out: a comprehension is a call in python 3.11
      o = others[0]
      rg, src = True if self._requires_grad or o._requires_grad else None, (self.uop, o.uop)
    else: rg, src = True if self._requires_grad or any(o._requires_grad for o in others) else None, (self.uop, *[o.uop for o in others])
    return _derived(UOp(op, dtype or (dtypes.bool if op in GroupOp.Comparison else self.uop.dtype), src), rg)
  def add(self, x, reverse=False) -> Tensor: a, b = self._broadcasted(x, reverse); return a._apply(Ops.ADD, b)
  def sub(self, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    return a._apply(Ops.ADD, b._apply(Ops.NEG)) if not dtypes.is_unsigned(a.dtype) else a._apply(Ops.SUB, b)
  def mul(self, x, reverse=False) -> Tensor: a, b = self._broadcasted(x, reverse); return a._apply(Ops.MUL, b)
  def div(self, x, reverse=False, rounding_mode: str | None = None) -> Tensor:
    if rounding_mode not in (None, "trunc", "floor"): raise ArgumentError(f"rounding_mode must be None, 'trunc' or 'floor', not {rounding_mode!r}")
    a, b = self._broadcasted(x, reverse)
    if rounding_mode == "trunc": return a.idiv(b) if dtypes.is_int(a.dtype) else (a.float_div(b)).trunc().cast(a.dtype)
    if rounding_mode == "floor":
      if dtypes.is_int(a.dtype): return a._floordiv_int(b)
      return a.float_div(b).floor()
    return a.float_div(b)
  def float_div(self, b: Tensor) -> Tensor:
    dt = least_upper_float(self.dtype)
    a, b = self.cast(dt), b.cast(least_upper_float(b.dtype) if dtypes.is_float(b.dtype) else dt)
    return a * b.reciprocal()
  def idiv(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    if not dtypes.is_int(a.dtype): raise TypeError(f"idiv needs integer tensors, got {a.dtype}")
    return a._apply(Ops.IDIV, b)
  def _floordiv_int(self, b: Tensor) -> Tensor:
    q = self._apply(Ops.IDIV, b)
    fix = ((self._apply(Ops.MOD, b)).ne(0) & ((self < 0) ^ (b < 0)))
    return q - fix.cast(q.dtype)
  def mod(self, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if dtypes.is_int(a.dtype):
      r = a._apply(Ops.MOD, b)
      return r + ((r.ne(0)) & ((r < 0) ^ (b < 0))).where(b, 0)   # python/torch: sign of the divisor
    return a - a.div(b, rounding_mode="floor") * b
  def neg(self) -> Tensor: return self._apply(Ops.NEG) if self.dtype != dtypes.bool else self.logical_not()
  def reciprocal(self) -> Tensor: x = self.cast(least_upper_float(self.dtype)); return x._apply(Ops.RECIP)
  def __neg__(self): return self.neg()
  def __add__(self, x): return self.add(x)
  def __radd__(self, x): return self.add(x, True)
  def __sub__(self, x): return self.sub(x)
  def __rsub__(self, x): return self.sub(x, True)
  def __mul__(self, x): return self.mul(x)
  def __rmul__(self, x): return self.mul(x, True)
  def __truediv__(self, x): return self.div(x)
  def __rtruediv__(self, x): return self.div(x, True)
  def __floordiv__(self, x): a, b = self._broadcasted(x); return a.div(b, rounding_mode="floor")
  def __rfloordiv__(self, x): a, b = self._broadcasted(x, True); return a.div(b, rounding_mode="floor")
  def __mod__(self, x): return self.mod(x)
  def __rmod__(self, x): return self.mod(x, True)
  def __pow__(self, x): return self.pow(x)
  def __rpow__(self, x): return self.pow(x, True)
  def __matmul__(self, x): return self.matmul(x)
  def __rmatmul__(self, x): return Tensor(x, device=self.device).matmul(self) if not isinstance(x, Tensor) else x.matmul(self)
  def __iadd__(self, x): return self.assign(self + x) if self.uop.base.op is Ops.BUFFER else self.replace(self + x)
  def __isub__(self, x): return self.assign(self - x) if self.uop.base.op is Ops.BUFFER else self.replace(self - x)
  def __imul__(self, x): return self.assign(self * x) if self.uop.base.op is Ops.BUFFER else self.replace(self * x)
  def __itruediv__(self, x): return self.assign(self / x) if self.uop.base.op is Ops.BUFFER else self.replace(self / x)
  def __lt__(self, x): a, b = self._broadcasted(x); return a._apply(Ops.CMPLT, b)
  def __gt__(self, x): a, b = self._broadcasted(x, True); return a._apply(Ops.CMPLT, b)
  # not(a < b) is a >= b only without NaN: floats spell it out so a NaN compares False, like numpy and torch
  def __ge__(self, x): a, b = self._broadcasted(x); return (a < b).logical_not() if not dtypes.is_float(a.dtype) else (a > b) | a.eq(b)
  def __le__(self, x): a, b = self._broadcasted(x); return (a > b).logical_not() if not dtypes.is_float(a.dtype) else (a < b) | a.eq(b)
  def ne(self, x) -> Tensor: a, b = self._broadcasted(x); return a._apply(Ops.CMPNE, b)
  def eq(self, x) -> Tensor: a, b = self._broadcasted(x); return a._apply(Ops.CMPEQ, b)
  def __ne__(self, x): return self.ne(x)
  def __eq__(self, x): return self.eq(x)
  def logical_not(self) -> Tensor:
    return self.cast(dtypes.bool)._apply(Ops.CMPNE, Tensor(UOp.const(dtypes.bool, True, self.device))._expand_to(self.shape))
  def _bitop(self, op, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if not (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool): raise DTypeError(f"bitwise ops need integer or bool tensors, got {a.dtype}")
    return a._apply(op, b)
  def bitwise_and(self, x) -> Tensor: return self._bitop(Ops.AND, x)
  def bitwise_or(self, x) -> Tensor: return self._bitop(Ops.OR, x)
  def bitwise_xor(self, x) -> Tensor: return self._bitop(Ops.XOR, x)
  def bitwise_not(self) -> Tensor: return self.logical_not() if self.dtype == dtypes.bool else self ^ -1
  def __and__(self, x): return self.bitwise_and(x)
  def __or__(self, x): return self.bitwise_or(x)
  def __xor__(self, x): return self.bitwise_xor(x)
  def __rand__(self, x): return self._bitop(Ops.AND, x, True)
  def __ror__(self, x): return self._bitop(Ops.OR, x, True)
  def __rxor__(self, x): return self._bitop(Ops.XOR, x, True)
  def __invert__(self): return self.bitwise_not()
  def lshift(self, x) -> Tensor: a, b = self._broadcasted(x); return a._bitop(Ops.SHL, b)
  def rshift(self, x) -> Tensor: a, b = self._broadcasted(x); return a._bitop(Ops.SHR, b)
  def __lshift__(self, x): return self.lshift(x)
  def __rshift__(self, x): return self.rshift(x)
  def where(self, x, y) -> Tensor:
    """self ? x : y, broadcasting all three."""
    cond = self.cast(dtypes.bool)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
      dt = dtypes.from_py(x) if type(x) is type(y) or isinstance(y, bool) else least_upper_dtype(dtypes.from_py(x), dtypes.from_py(y))
      x = Tensor(UOp.const(dt, x, cond.device))
    if not isinstance(x, Tensor): x = y._broadcast_const(x, _scalar_dtype_beside(x, y.dtype))
    if not isinstance(y, Tensor): y = x._broadcast_const(y, _scalar_dtype_beside(y, x.dtype))
    x, y = x._broadcasted(y)
    shape = broadcast_shape(cond.shape, x.shape)
    cond, x, y = cond._expand_to(shape), x._expand_to(shape), y._expand_to(shape)
    return cond._apply(Ops.WHERE, x, y, dtype=x.dtype)
  def maximum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a | b
    return a._apply(Ops.MAX, b)
  def minimum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a & b
    # floats negate exactly (and keep maximum's tie gradient); ints select: -int.min overflows
    return -((-a).maximum(-b)) if dtypes.is_float(a.dtype) else (a < b).where(a, b)
  def clamp(self, min_=None, max_=None) -> Tensor:
    if min_ is None and max_ is None: raise RuntimeError("clamp needs min or max (both are None)")   # torch's error class
    # selects, not maximum/minimum: at a bound the gradient is 1 (torch), not the 0.5 a tie in maximum gets; nan passes
    x = self
    if min_ is not None: a, b = x._broadcasted(min_); x = (a < b).where(b, a)
    if max_ is not None: a, b = x._broadcasted(max_); x = (a > b).where(b, a)
    return x
  clip = clamp
  def cast(self, dtype) -> Tensor:
    dt = to_dtype(dtype)
    return self if self.dtype == dt else self._wrap(self.uop.cast(dt))
  def bitcast(self, dtype) -> Tensor:
    dt = to_dtype(dtype)
    if dt.itemsize != self.dtype.itemsize:
      if self.ndim == 0 or (self.shape[-1] * self.dtype.itemsize) % dt.itemsize:
        raise ValueError(f"can't bitcast {self.shape} of {self.dtype} to {dt}: the last dim's bytes don't divide")
      raise NotImplementedError("bitcast between different item sizes is not supported yet")
    return self if self.dtype == dt else Tensor(self.uop.bitcast(dt))
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def short(self) -> Tensor: return self.cast(dtypes.int16)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)
  def bfloat16(self) -> Tensor: return self.cast(dtypes.bfloat16)

  # unary math: core primitives are exp2, log2, sin, sqrt, recip; the rest is composed
  def _float(self) -> Tensor: return self.cast(least_upper_float(self.dtype))
  def exp2(self) -> Tensor: return self._float()._apply(Ops.EXP2)
  def log2(self) -> Tensor: return self._float()._apply(Ops.LOG2)
  def exp(self) -> Tensor: return (self._float() * (1 / math.log(2))).exp2()
  def log(self) -> Tensor: return self.log2() * math.log(2)
  def sqrt(self) -> Tensor: return self._float()._apply(Ops.SQRT)
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def sin(self) -> Tensor: return self._float()._apply(Ops.SIN)
  def cos(self) -> Tensor: return (math.pi / 2 - self._float()).sin()
  def tan(self) -> Tensor: return self.sin() / self.cos()
  def trunc(self) -> Tensor: return self if not dtypes.is_float(self.dtype) else self._apply(Ops.TRUNC)
  def floor(self) -> Tensor: t = self.trunc(); return t if not dtypes.is_float(self.dtype) else (self < t).where(t - 1, t)
  def ceil(self) -> Tensor: t = self.trunc(); return t if not dtypes.is_float(self.dtype) else (self > t).where(t + 1, t)
  def round(self) -> Tensor:
    """Round half to even, like numpy and torch."""
    if not dtypes.is_float(self.dtype): return self
    f = self.floor(); diff = self - f
    even = (f * 0.5).floor() * 2 == f
    return (diff > 0.5).where(f + 1, (diff < 0.5).where(f, even.where(f, f + 1)))
  def abs(self) -> Tensor:
    if dtypes.is_unsigned(self.dtype) or self.dtype == dtypes.bool: return self
    if not dtypes.is_float(self.dtype): return (self < 0).where(-self, self)
    # floats: abs(-0.0) is +0.0 and nan stays nan; the gradient is 0 at 0 like torch's (no x*x: its masked gradient
    # would be 0*inf = nan at +-inf)
    return (self < 0).where(-self, (self > 0).where(self, (self != self).where(self, 0.0)))
  def sign(self) -> Tensor: return (self > 0).cast(self.dtype) - (self < 0).cast(self.dtype) if self.dtype != dtypes.bool else self
  def square(self) -> Tensor: return self * self
  def pow(self, x, reverse=False) -> Tensor:
    """self ** x with torch's values and gradients: int ** non-negative int stays an exact int, anything with a float
    is float; a negative base takes the sign of an odd integer exponent and is nan for a fractional one (-inf excepted)."""
    if not reverse and isinstance(x, (int, float)) and not isinstance(x, bool):
      if isinstance(x, float) and not dtypes.is_float(self.dtype): return self._float().pow(x)
      if not dtypes.is_float(self.dtype):
        if x < 0: raise DTypeError(f"an integer tensor ({self.dtype}) to a negative integer power ({x}) isn't an integer; cast to float first")
        return self._int_pow(int(x))
      if x == 0: return self.detach().eq(self.detach()).where(1, 1).cast(self.dtype)   # 1 (nan too), still in the graph: a zero gradient
      if x == 1: return self
      if x == -1: return self.reciprocal()
      if x == 0.5: return self.sqrt()
      if x == int(x) and 2 <= x <= 8: return self._int_pow(int(x))
    a, b = self._broadcasted(x, reverse)
    if not dtypes.is_float(a.dtype):
      if dtypes.is_int(b.dtype) and b.uop.base.op is Ops.CONST and b.uop.base.arg < 0:
        raise DTypeError(f"an integer tensor ({a.dtype}) to a negative integer power isn't an integer; cast to float first")
      # integer tensor exponents: exact while the result fits float64's 53-bit mantissa, then cast (torch wraps; so does the cast)
      return a.cast(dtypes.float64).pow(b.cast(dtypes.float64)).round().cast(a.dtype)
    return a._float_pow(b)
  def _int_pow(self, n: builtins.int) -> Tensor:
    """self ** n for an int n >= 0 by repeated squaring: exact for ints (wrapping like torch), ~2*log2(n) multiplies."""
    out, sq = None, self
    while True:
      if n & 1: out = sq if out is None else out * sq
      n >>= 1
      if not n: break
      sq = sq * sq
    return out if out is not None else self.ones_like()
  def _float_pow(self, b: Tensor) -> Tensor:
    """|a| ** b through the POW primitive (whose gradient rule gives torch's values at 0 and inf), computed in float32 or
    wider and never on a negative base (a device's pow may be exp2(b*log2(a))); then the sign of a negative base."""
    dt = self.dtype
    wide = dtypes.float32 if dt.itemsize < 4 else dt
    a, b = self.cast(wide), b.cast(wide)
    neg = a < 0
    mag = neg.where(-a, a)._apply(Ops.POW, b)
    b_int = b.trunc() == b
    odd = b_int & ((b.abs() * 0.5).trunc() * 2 != b.abs())
    # a negative base: an odd power is negative, an even one positive, a fractional one nan (but C's pow(-inf, 0.3) is inf)
    sign = neg.where(odd.where(-1.0, (b_int | (a == -math.inf)).where(1.0, math.nan)), 1.0)
    out = mag * sign
    # torch's d/db is a**b * ln(a), nan for a negative base: mag is |a|**b, so add a term that is 0 forward and whose
    # gradient is nan (sqrt's at 0 is inf, times (b - b) = 0) where a < 0 and b is finite
    if b.uop.base.op is not Ops.CONST and b.requires_grad is not False:
      carry = neg & b.isfinite()   # elsewhere the sqrt sees 1, so its masked-off gradient stays 0, not 0/0
      out = out + carry.where(carry.where((b - b.detach()).square(), 1.0).sqrt(), 0.0)
    return out.cast(dt)

  # ---- reductions
  def _axes(self, axis) -> tuple[builtins.int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    resolved = tuple(sorted({self._resolve_dim(a) for a in axes}))
    return resolved if self.ndim else ()   # a 0-d tensor takes axis 0 or -1 (as torch does) and has nothing to reduce
  def _reduce(self, op: Ops, axis=None, keepdim=False) -> Tensor:
    # a zero-size axis reduces to the op's identity (0, 1, the dtype's min) in the backend; the REDUCE_AXIS node stays in
    # the graph so gradients still reach `self` (a constant here would cut it off)
    axes = self._axes(axis)
    u = self.uop.r(op, axes)
    if not keepdim: u = u.reshape(tuple([s for i, s in enumerate(self.uop.shape) if i not in axes]))
    return self._wrap(u)
  def sum(self, axis=None, keepdim=False, dtype=None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    # half/bfloat16/fp8 add in float32 and round once at the end (as torch does): a half accumulator stops at 2048 ones
    if dtype is None and dtypes.is_float(acc) and acc.itemsize < 4: return self.cast(dtypes.float32)._reduce(Ops.ADD, axis, keepdim).cast(acc)
    return self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
  def prod(self, axis=None, keepdim=False, dtype=None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    return self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis=None, keepdim=False) -> Tensor:
    # torch refuses max/min over an empty dimension (its identity, -inf or the dtype's min, is rarely what the user meant)
    if any(self.shape[a] == 0 for a in self._axes(axis)):
      raise ValueError(f"max/min of an empty dimension (shape {self.shape}, axis {axis}) has no identity")
    if self.dtype == dtypes.bool: return self.cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
    return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis=None, keepdim=False) -> Tensor:
    if dtypes.is_unsigned(self.dtype) or self.dtype == dtypes.bool:
      flipped = (dtypes.max(self.dtype) - self.cast(self.dtype if self.dtype != dtypes.bool else dtypes.uint8)).max(axis, keepdim)
      return flipped.__rsub__(dtypes.max(self.dtype) if self.dtype != dtypes.bool else 1).cast(self.dtype)
    if not dtypes.is_float(self.dtype): return ~((~self).max(axis, keepdim))   # ~ reverses int order; -int.min overflows
    return -((-self).max(axis, keepdim))
  def mean(self, axis=None, keepdim=False) -> Tensor:
    axes = self._axes(axis)
    n = prod([self.shape[a] for a in axes])
    out = self._float().sum(axis, keepdim)
    return out * (1 / n) if n else out._all_nan()
  def var(self, axis=None, keepdim=False, correction=1) -> Tensor:
    axes = self._axes(axis)
    n = prod([self.shape[a] for a in axes])
    sq = (self._float() - self._float().mean(axis, keepdim=True)).square().sum(axis, keepdim)
    return sq / max(n - correction, 0) if n else sq._all_nan()
  def _all_nan(self) -> Tensor:
    # the nan of a statistic over nothing (torch): selected, not computed as 0 * nan or 0 / 0, which a device may fold
    # to 0 (WGSL lets implementations assume no nan in arithmetic); still a node of this graph, so gradients reach it
    return self.isnan().where(self, math.nan)
  def std(self, axis=None, keepdim=False, correction=1) -> Tensor: return self.var(axis, keepdim, correction).sqrt()
  def var_mean(self, axis=None, keepdim=False, correction=1): return self.var(axis, keepdim, correction), self.mean(axis, keepdim)
  def std_mean(self, axis=None, keepdim=False, correction=1): return self.std(axis, keepdim, correction), self.mean(axis, keepdim)
  def any(self, axis=None, keepdim=False) -> Tensor:
    # the MAX reduce directly: over an empty axis it gives its identity, False (as torch's any does)
    return self.bool().cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
  def all(self, axis=None, keepdim=False) -> Tensor: return self.logical_not().any(axis, keepdim).logical_not()

  # ---- composition
  def sequential(self, ll: list[Callable[[Tensor], Tensor]]) -> Tensor: return functools.reduce(lambda x, f: f(x), ll, self)

  # ---- autograd
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    """d self / d target for each target. A target the graph reaches only through ops without a gradient (comparisons,
    sign, casts to int) gets zeros, as in tinygrad; one that is not in the graph at all is an error (a likely mistake)."""
    from tinycore.gradient import compute_gradient
    if not dtypes.is_float(self.dtype) or not all(dtypes.is_float(t.dtype) for t in targets):
      raise RuntimeError(f"only floating-point tensors have gradients (output {self.dtype}, targets {', '.join(str(t.dtype) for t in targets)})")
    if gradient is None and self.numel() != 1: raise ValueError(f"gradient of a non-scalar output of shape {self.shape} needs an explicit `gradient`")
    g = gradient if gradient is not None else Tensor.ones(*self.shape, device=self.device, dtype=self.dtype)
    grads = compute_gradient(self.uop, g.uop, {t.uop for t in targets})
    nodes = set(self.uop.toposort()) if any(t.uop not in grads for t in targets) else set()
    out = []
    for t in targets:
      if t.uop in grads: out.append(Tensor(grads[t.uop]))
      elif t.uop in nodes: out.append(t.zeros_like())
      else: raise ValueError(f"a target of shape {t.shape} is not part of the graph of this tensor")
    return out
  def requires_grad_(self, requires_grad: builtins.bool = True):
    self.requires_grad = requires_grad   # type: ignore[misc]   # a property, set on the class below
    return self
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Fill t.grad with d self / d t for every live floating-point tensor t in this graph whose requires_grad isn't
    False (tinygrad 0.14's rule: None counts, so a plain Tensor used in the graph gets a .grad too). requires_grad=True
    tensors accumulate across calls; None ones hold the latest gradient."""
    from tinycore.gradient import compute_gradient
    if gradient is None and self.numel() != 1: raise ValueError(f"backward of a non-scalar output of shape {self.shape} needs an explicit `gradient`")
    if not dtypes.is_float(self.dtype): raise RuntimeError(f"backward of a {self.dtype} tensor: only floating-point outputs have gradients")
    g = gradient if gradient is not None else Tensor.ones(*self.shape, device=self.device, dtype=self.dtype)
    targets = _grad_targets(self)
    grads = compute_gradient(self.uop, g.uop, {t.uop for t in targets})
    for t in targets:
      gt = Tensor(gu, device=t.device) if (gu := grads.get(t.uop)) is not None else t.zeros_like()
      if gt.shape != t.shape: raise RuntimeError(f"gradient shape {gt.shape} doesn't match tensor shape {t.shape}")
      # requires_grad=True accumulates (torch, tinygrad); a tensor that never asked (None) gets this backward's gradient
      # only: accumulating there would grow one lazy graph per step on every frozen weight no optimizer ever resets
      t.grad = gt if t.grad is None or t.requires_grad is None else (t.grad + gt)
    return self

  class train:
    """`with Tensor.train(): ...` sets Tensor.training (dropout and batchnorm read it)."""
    def __init__(self, mode: bool = True): self.mode = mode
    def __enter__(self): self.prev, Tensor.training = Tensor.training, self.mode
    def __exit__(self, *a): Tensor.training = self.prev
    def __call__(self, fn):
      @functools.wraps(fn)
      def wrapper(*a, **kw):
        with Tensor.train(self.mode): return fn(*a, **kw)
      return wrapper
  class test(train):
    def __init__(self): super().__init__(False)


class _LiveTensors:
  """Every live Tensor, kept by identity (backward() finds the ones in its graph here): a WeakSet would compare two
  tensors with ==, which is elementwise. Every tensor is added on construction, so this is a dict of plain weak
  references by id: no callback runs when a tensor dies (that was a python call per tensor of every eager op); dead
  entries are dropped in one sweep once they could outnumber the live ones (amortized O(1) per tensor), and an id
  reused by a new tensor just replaces its dead entry."""
  # the least number of entries a sweep waits for: dead ones cost ~150 bytes each until then (at 4096, ~0.6 MiB of an
  # LLM run's peak RSS), and the sweep's cost is the same per tensor at any size
  MIN_SWEEP = 1024
  def __init__(self):
    self.d: dict[int, weakref.ref[Tensor]] = {}
    self.sweep_at = self.MIN_SWEEP
  def add(self, t: Tensor) -> None:
    self.d[id(t)] = weakref.ref(t)
    if len(self.d) > self.sweep_at:
      self.d = {k: r for k, r in self.d.items() if r() is not None}
      self.sweep_at = max(self.MIN_SWEEP, 2 * len(self.d))
  def __iter__(self): return iter([t for r in list(self.d.values()) if (t := r()) is not None])
_live_tensors = _LiveTensors()
def _get_requires_grad(self) -> bool | None: return self._requires_grad
def _set_requires_grad(self, v: bool | None) -> None:
  # every tensor passes here on construction (the JIT's fast rebuild too), so this is where it is registered
  self._requires_grad = v
  _live_tensors.add(self)
Tensor.requires_grad = property(_get_requires_grad, _set_requires_grad)
register_tensor_type(Tensor)

def _derived(u: UOp, requires_grad: bool | None) -> Tensor:
  """A tensor for a UOp the frontend built from other tensors: what Tensor(u) does, without its checks of user input
  (this is every op's path; the checks cost more than the op)."""
  t = object.__new__(Tensor)
  t.uop, t._requires_grad, t.grad = u, requires_grad, None
  _live_tensors.add(t)
  return t

_scalar_consts: dict[tuple, UOp] = {}
def _scalar_beside(u: UOp, v: ConstType) -> UOp | None:
  """The python scalar `v` broadcast to `u` (same dtype, device and shape), or None when that needs the general path (a
  promoted dtype, a symbolic shape, a device tuple). Kept per (dtype, device, shape, value): eager loops rebuild the same
  few constants on every call, and hash-consing gives back these same nodes."""
  key = (u.dtype, u.device, u.shape, v.__class__, v, math.copysign(1.0, v) if v.__class__ is float else 0)
  if (c := _scalar_consts.get(key)) is not None: return c
  if not isinstance(key[1], str) or key[2] is None or not all_int(key[2]) or _scalar_dtype_beside(v, u.dtype) != u.dtype: return None
  if len(_scalar_consts) >= 4096: _scalar_consts.clear()
  _scalar_consts[key] = c = u.const_like(v)
  return c

def _grad_targets(t: Tensor) -> list[Tensor]:
  nodes = set(t.uop.toposort())
  return [x for x in _live_tensors if x.requires_grad is not False and x.uop in nodes and dtypes.is_float(x.dtype)
          and x.device is not None]

def _empty(device, shape: tuple, dtype: DType) -> UOp:
  return UOp(Ops.BUFFER, dtype, (), Buffer(device, prod(shape) if all_int(shape) else 0, dtype)).reshape(shape)
