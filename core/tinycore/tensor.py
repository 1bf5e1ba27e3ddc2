"""Tensor: the user-facing, lazily evaluated array. Every op builds UOps; realize() hands the graph to the engine."""
from __future__ import annotations
import math, functools, weakref, operator
from typing import Any, Callable, Union
from tinycore.dtype import DType, dtypes, least_upper_dtype, least_upper_float, sum_acc_dtype, to_dtype, truncate
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.helpers import prod, all_int, flatten
from tinycore.device import Device, Buffer
from tinycore.tensor_random import RandomMixin
from tinycore.tensor_indexing import IndexingMixin
from tinycore.tensor_movement import MovementMixin
from tinycore.tensor_nn import NNMixin
from tinycore.tensor_linalg import LinalgMixin
from tinycore.tensor_hash import HashMixin
from tinycore.tensor_errors import ShapeError, ArgumentError, DTypeError, UnsupportedModeError, ShapeEntryError
from tinycore import tensor_multi as _multi   # multi-device (sharded) tensors: the hooks below are marked "multi:"

def _to_np_dtype(dtype: DType):
  """The numpy dtype a tensor of `dtype` reads back as (tinygrad's name; None where numpy has no such type)."""
  return dtype.np if dtype.fmt is not None else None

sint = Union[int, UOp]
ConstType = Union[float, int, bool]

def _canon_device(device: str | tuple | None) -> str | tuple[str, ...]:
  if isinstance(device, (tuple, list)):
    _multi.ACTIVE = True   # multi: a device tuple makes replicated tensors, so Tensor.__init__ must check from now on
    return tuple(Device.canonicalize(d) for d in device)
  return Device.canonicalize(device) if device is not None else Device.DEFAULT

def _scalar_dtype_beside(v: ConstType, other: DType) -> DType:
  """The dtype a python scalar takes next to a tensor of dtype `other` (torch's rule): a bool, an int with an int or
  float tensor, a float with a float tensor all take the tensor's dtype (relu of uint8 stays uint8); else the scalar's own."""
  if isinstance(v, bool) or (isinstance(v, int) and not dtypes.is_bool(other)) or (isinstance(v, float) and dtypes.is_float(other)): return other
  return dtypes.from_py(v)

def _scalar(v: ConstType, dt: DType, device: str) -> UOp:
  """A 0-d tensor's value, as its dtype holds it: Tensor(1.1, dtype=dtypes.fp8e4m3) is 1.125, like a 1-element tensor."""
  return UOp.const(dt, truncate(dt, float(v)) if dtypes.is_float(dt) else v, device)

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

class Tensor(RandomMixin, IndexingMixin, MovementMixin, NNMixin, LinalgMixin, HashMixin):
  """A lazily evaluated multi-dimensional array on a device, with autograd."""
  __slots__ = ("uop", "_requires_grad", "grad", "__weakref__")
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
    if _multi.ACTIVE or multi_dev is not None: u = _multi.on_tensor(u, multi_dev)   # multi: push ops on shards down to each shard
    self.uop: UOp = u
    self.requires_grad: bool | None = requires_grad
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
    return create_schedule(_multi.flatten([t.uop for t in (self, *lst)]))   # multi: every shard
  def realize(self, *lst: Tensor, do_update_stats=True) -> Tensor:
    from tinycore.engine.realize import realize_uops
    ts = [t for t in (self, *lst)]
    new = _multi.unflatten([t.uop for t in ts], realize_uops(_multi.flatten([t.uop for t in ts])))   # multi: all shards at once
    for t, u in zip(ts, new): t.uop = u
    return self
  def is_realized(self) -> bool: return all(u.base.op is Ops.BUFFER for u in _multi.flatten([self.uop]))   # multi: every shard
  def _buffer(self) -> Buffer:
    # a pending assign runs once, here, and afterwards self reads its result; any other lazy graph stays (gradients use it)
    if self.uop.op is Ops.ASSIGN: self.realize()
    if _multi.is_multi(self.uop): return self.to(self.device[0])._buffer()   # multi: gather onto the first device
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
    from tinycore.tensor_multi import is_multi
    if is_multi(y.uop): return self.shard(y.uop.arg[2], y.uop.arg[1])
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
    if self.uop.base.op is not Ops.BUFFER: self.uop = x.uop; return self
    self.uop = UOp(Ops.ASSIGN, self.dtype, (self.uop, x.uop))
    return self
  def replace(self, x: Tensor) -> Tensor:
    if x.shape != self.shape: raise ValueError(f"replace shape mismatch: {self.shape} vs {x.shape}")
    self.uop = x.uop
    return self

  def _wrap(self, u: UOp) -> Tensor:
    """A new tensor from a UOp computed from this one; gradients flow when this one needs them."""
    return Tensor(u, requires_grad=True if self.requires_grad else None)

  # ---- creation
  @staticmethod
  def empty(*shape, device=None, dtype=None, **kw) -> Tensor:
    return Tensor(_empty(_canon_device(device), _shape_arg(shape), to_dtype(dtype) if dtype else dtypes.default_float), **kw)
  @staticmethod
  def from_blob(ptr: int, shape: tuple[int, ...], **kwargs) -> Tensor:
    """A tensor over `prod(shape)` elements at address `ptr` on `device` (default: the default device), without copying or
    taking ownership: the memory must outlive the tensor. `dtype`/`device` pick the type and device; other kwargs go to Tensor."""
    dt, dev = to_dtype(kwargs.pop("dtype", None) or dtypes.default_float), _canon_device(kwargs.pop("device", None))
    if not isinstance(ptr, int) or ptr <= 0: raise ValueError(f"from_blob needs a non-null integer address, got {ptr!r}")
    shape = _shape_arg((shape,) if isinstance(shape, int) else shape)
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
    shape = _shape_arg((shape,) if hasattr(shape, "__index__") or isinstance(shape, UOp) else shape)
    c = UOp.const(_scalar_dtype(fill_value, to_dtype(dtype) if dtype else None), fill_value, _canon_device(device))
    return Tensor(c.reshape((1,) * len(shape)).expand(shape), **kw)
  @staticmethod
  def zeros(*shape, **kw) -> Tensor: return Tensor.full(_shape_arg(shape), 0.0 if "dtype" not in kw or kw["dtype"] is None else 0, **{**kw, "dtype": kw.get("dtype") or dtypes.default_float})
  @staticmethod
  def ones(*shape, **kw) -> Tensor: return Tensor.full(_shape_arg(shape), 1, **{**kw, "dtype": kw.get("dtype") or dtypes.default_float})
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
    return (idx.cast(dt) * step + start).cast(dt) if dtypes.is_float(dt) else (idx * step + start).cast(dt)
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
  def _pool_last(self, k: int) -> Tensor:
    """Sliding windows of size k (stride 1) over the last axis (length L = n + k): shape (..., n, k), out[i, j] = x[i + j]."""
    L = self.shape[-1]; n = L - k
    pre = self.shape[:-1]
    # repeat then reshape trick: (.., L) -> (.., k+1 copies) -> flat -> shrink -> (.., k, L+1) ... take window rows
    x = self.unsqueeze(-2).expand(*pre, n + 1, L).reshape(*pre, (n + 1) * L)
    x = x.shrink(tuple((0, s) for s in pre) + ((0, n * (L + 1)),)).reshape(*pre, n, L + 1)
    return x.shrink(tuple((0, s) for s in pre) + ((0, n), (0, k)))
  @staticmethod
  def eye(n: int, m: int | None = None, **kw) -> Tensor:
    m = n if m is None else m
    dt = kw.pop("dtype", None) or dtypes.default_float
    r = Tensor._index_range(n, kw.get("device")).reshape(n, 1)
    c = Tensor._index_range(m, kw.get("device")).reshape(1, m)
    return Tensor((r == c).cast(dt).uop, requires_grad=kw.get("requires_grad"))
  def _broadcast_const(self, x, dtype=None) -> Tensor:
    return Tensor(UOp.const(dtype or self.dtype, x, self.device))   # multi: a device tuple makes a replicated const

  # ---- movement (argument checks here, in the user's terms)
  def reshape(self, shape, *args) -> Tensor:
    new = (shape,) + args if args or not isinstance(shape, (tuple, list)) else tuple(shape)
    # None keeps that dim (tinygrad): reshape((None, None, 6, 6)) on (4, 3, 6, 6)
    if any(s is None for s in new):
      if len(new) > self.ndim: raise ShapeError(f"reshape: None keeps a dim, but {new} has more dims than {self.shape}")
      new = tuple(self.shape[i] if s is None else s for i, s in enumerate(new))
    new = _shape_arg(new, infer=True)
    if sum(1 for s in new if isinstance(s, int) and s == -1) > 1: raise ShapeError(f"only one dimension can be -1, got {new}")
    if -1 in new:
      known = prod(s for s in new if not (isinstance(s, int) and s == -1))
      if known == 0 or self.numel() % known != 0: raise ShapeError(f"can't reshape {self.shape} into {new}")
      new = tuple(self.numel() // known if (isinstance(s, int) and s == -1) else s for s in new)
    if any(isinstance(s, int) and s < 0 for s in new): raise ShapeError(f"negative dimension in reshape target {new}")
    if prod(new) != self.numel() if all_int(new) and all_int(self.shape) else False:
      raise ShapeError(f"can't reshape tensor of shape {self.shape} ({self.numel()} elements) into {new} ({prod(new)} elements)")
    if not (all_int(new) and all_int(self.shape)) and None not in (n := (_bound_value(prod(new)), _bound_value(prod(self.shape)))) and n[0] != n[1]:
      raise ValueError(f"can't reshape tensor of shape {_render_arg(self.shape)} ({n[1]} elements) into {_render_arg(new)} ({n[0]} elements) "
                       f"with {_bindings(*new, *self.shape)}")
    return self._wrap(self.uop.reshape(new))
  def view(self, *shape) -> Tensor: return self.reshape(*shape)
  def expand(self, shape, *args) -> Tensor:
    new = _shape_arg((shape,) + args if args or not isinstance(shape, (tuple, list)) else shape, infer=True)
    if len(new) < self.ndim: raise ShapeError(f"can't expand {self.shape} to fewer dimensions {new}")
    x = self.reshape((1,) * (len(new) - self.ndim) + self.shape) if len(new) != self.ndim else self
    new = tuple(xs if (isinstance(n, int) and n == -1) else n for xs, n in zip(x.shape, new))
    for xs, n in zip(x.shape, new):
      if not (xs == n or xs == 1): raise ShapeError(f"can't expand {self.shape} to {new}: dimension of size {xs} is not 1")
    return x._wrap(x.uop.expand(new))
  def permute(self, order, *args) -> Tensor:
    order = tuple(order) if not isinstance(order, int) else (order,) + args
    order = tuple(self._resolve_dim(o) for o in order)
    if sorted(order) != list(range(self.ndim)): raise ShapeError(f"permute order {order} is not a permutation of the {self.ndim} dims of {self.shape}")
    return self._wrap(self.uop.permute(order))
  def transpose(self, dim0=1, dim1=0) -> Tensor:
    if self.ndim < 2 and dim0 == 1 and dim1 == 0: return self
    order = list(range(self.ndim))
    d0, d1 = self._resolve_dim(dim0), self._resolve_dim(dim1)
    order[d0], order[d1] = order[d1], order[d0]
    return self.permute(order)
  def flip(self, axis, *args) -> Tensor:
    given = [self._resolve_dim(a) for a in ((axis,) + args if isinstance(axis, int) else axis)]
    if len(set(given)) != len(given): raise ArgumentError(f"flip dims {tuple((axis,) + args if isinstance(axis, int) else axis)} name a dim twice (shape {self.shape})")
    axes = set(given)
    return self._wrap(self.uop.flip(tuple(i in axes for i in range(self.ndim))))
  def shrink(self, arg) -> Tensor:
    if len(arg) != self.ndim: raise ValueError(f"shrink needs {self.ndim} (start, end) pairs for shape {self.shape}, got {len(arg)}")
    arg = tuple((0, s) if a is None else a for a, s in zip(arg, self.shape))
    for (b, e), s in zip(arg, self.shape):
      if all_int((b, e, s)) and not 0 <= b <= e <= s: raise ValueError(f"shrink {arg} is out of bounds for shape {self.shape}")
      # a symbolic bound is checked at its bound value here (and at every run, engine/run.py): a kernel never reads past a buffer
      if not all_int((b, e, s)) and None not in (vals := tuple(_bound_value(x) for x in (b, e, s))) and not 0 <= vals[0] <= vals[1] <= vals[2]:
        raise ValueError(f"shrink {_render_arg(arg)} is out of bounds for shape {_render_arg(self.shape)} with {_bindings(b, e, s)}: "
                         f"({vals[0]}, {vals[1]}) is not inside 0..{vals[2]}")
    return self._wrap(self.uop.shrink(arg))
  def pad(self, padding, mode: str = "constant", value: float = 0.0) -> Tensor:
    """`padding` as ((before, after), ...) per dim, or flat torch style (last dim first: (left, right, top, bottom, ...))."""
    if all(isinstance(p, int) for p in padding):
      if len(padding) % 2 or len(padding) // 2 > self.ndim: raise ArgumentError(f"flat padding {padding} must have an even length at most 2*{self.ndim}")
      pairs = [(0, 0)] * (self.ndim - len(padding) // 2) + [(padding[i], padding[i + 1]) for i in range(len(padding) - 2, -1, -2)]
    else: pairs = [(0, 0) if p is None else tuple(p) for p in padding]
    if len(pairs) != self.ndim: raise ArgumentError(f"padding {padding} doesn't match the {self.ndim} dims of {self.shape}")
    if mode not in ("constant", "reflect", "replicate", "circular"):
      raise UnsupportedModeError(f"pad mode must be constant, reflect, replicate or circular, not {mode!r}")
    if mode != "constant": return self._pad_mode(pairs, mode)
    x = self
    if any(b < 0 or e < 0 for b, e in pairs):   # negative padding shrinks
      x = x.shrink(tuple((-min(b, 0), s + min(e, 0)) for (b, e), s in zip(pairs, x.shape)))
      pairs = [(max(b, 0), max(e, 0)) for b, e in pairs]
    out = x._wrap(x.uop.pad(tuple(pairs)))
    if value != 0:
      mask = Tensor(Tensor.ones(*x.shape, dtype=dtypes.bool, device=x.device).uop.pad(tuple(pairs)))
      out = mask.where(out, value)
    return out
  def _pad_mode(self, pairs, mode: str) -> Tensor:
    """reflect/replicate/circular padding as torch defines it: output position j of a dim reads input position j - before,
    mapped back inside the dim; a negative pad crops the padded result (so (3, -3) still reflects 3 elements)."""
    x = self
    for d, (b, e) in enumerate(pairs):
      if b == 0 and e == 0: continue
      n = x.shape[d]
      if not isinstance(n, int): raise ShapeError(f"{mode} padding needs a concrete size for dim {d}, got {_render_arg(n)}")
      if n + b + e < 0: raise ShapeError(f"padding {(b, e)} leaves a negative size for dim {d} of size {n}")
      if mode == "reflect" and (b >= n or e >= n): raise ArgumentError(f"reflect padding {(b, e)} must be smaller than dim {d} of size {n}")
      if mode == "circular":   # torch crops a negative side first, then wraps what is left
        if b < 0 or e < 0: x, n, b, e = x._slice_dim(d, max(-b, 0), n - max(-e, 0)), n - max(-b, 0) - max(-e, 0), max(b, 0), max(e, 0)
        if b > n or e > n: raise ArgumentError(f"circular padding {(b, e)} can't exceed dim {d} of size {n} (it wraps at most once)")
      if mode == "replicate" and n == 0 and b + e > 0: raise ArgumentError(f"replicate padding of dim {d} needs a non-empty dim")
      def src(p: int) -> int:
        if mode == "reflect": return -p if p < 0 else 2 * (n - 1) - p if p >= n else p
        if mode == "replicate": return min(max(p, 0), n - 1)
        return p % n
      x = x._take_runs(d, [src(p) for p in range(-b, n + e)])
    return x
  def _take_runs(self, d: int, idx: list[int]) -> Tensor:
    """self indexed along dim d by a static list of positions, built from its runs (ascending, descending or repeated)
    as slices, flips and expands joined by one cat: only movement ops, so it fuses and its gradient is exact."""
    parts, i = [], 0
    while i < len(idx):
      j, step = i + 1, (idx[i + 1] - idx[i]) if i + 1 < len(idx) else 0
      if step not in (-1, 0, 1): step = 0
      while j < len(idx) and idx[j] - idx[j - 1] == step and (step != 0 or idx[j] == idx[i]): j += 1
      lo, hi = min(idx[i], idx[j - 1]), max(idx[i], idx[j - 1])
      part = self._slice_dim(d, lo, hi + 1)
      if step == -1 and j - i > 1: part = part.flip(d)
      if step == 0 and j - i > 1: part = part.expand(*[j - i if k == d else s for k, s in enumerate(part.shape)])
      parts.append(part)
      i = j
    if not parts: return self._slice_dim(d, 0, 0)
    return parts[0] if len(parts) == 1 else Tensor.cat(*parts, dim=d)
  def _slice_dim(self, d: int, b: int, e: int) -> Tensor:
    return self.shrink(tuple((b, e) if i == d else (0, s) for i, s in enumerate(self.shape)))
  def squeeze(self, dim=None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    dims = {self._resolve_dim(d) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}   # a 0-d tensor takes dim 0 or -1
    return self.reshape(tuple(s for i, s in enumerate(self.shape) if not (i in dims and s == 1)))
  def unsqueeze(self, dim: int) -> Tensor:
    d = self._resolve_dim(dim, extra=True)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def flatten(self, start_dim=0, end_dim=-1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._resolve_dim(start_dim), self._resolve_dim(end_dim)
    return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def unflatten(self, dim: int, sizes) -> Tensor:
    d = self._resolve_dim(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])
  def _resolve_dim(self, dim: int, *, extra: bool = False) -> int:
    total = self.ndim + int(extra)
    if not isinstance(dim, int): raise TypeError(f"dimension must be an int, got {type(dim).__name__}")
    if not -max(1, total) <= dim < max(1, total): raise IndexError(f"dimension {dim} is out of range for a tensor of {self.ndim} dims {self.shape}")
    return dim + total if dim < 0 else dim

  def cat(self, *args: Tensor, dim: int = 0) -> Tensor:
    """`a.cat(b, c, dim=d)` or `Tensor.cat(a, b)` / `Tensor.cat([a, b])` (tinygrad's cat is a method)."""
    tensors = _tensor_list("cat", self, args)
    t0 = tensors[0]
    if t0.ndim == 0: raise IndexError("cat: 0-d tensors can't be concatenated (stack them, or reshape to 1-d)")
    d = t0._resolve_dim(dim)
    for t in tensors[1:]:
      if t.ndim != t0.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, t0.shape)) if i != d):
        raise ShapeError(f"cat: shapes {t0.shape} and {t.shape} differ outside dim {d}")
    dt = least_upper_dtype(*[t.dtype for t in tensors])
    total, off, out = sum(t.shape[d] for t in tensors), 0, None
    for t in tensors:
      p = t.cast(dt).pad(tuple((off, total - off - t.shape[d]) if i == d else (0, 0) for i in range(t.ndim)))
      out = p if out is None else out + p
      off += t.shape[d]
    return out
  def cat_(self, *args, dim=0) -> Tensor: return Tensor.cat(self, *args, dim=dim)
  def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
    tensors = _tensor_list("stack", self, args)
    return Tensor.cat(*[t.unsqueeze(dim) for t in tensors], dim=dim)

  # ---- indexing (basic: ints, slices with steps, None, Ellipsis; tensor indices in _getitem_tensor)
  def __getitem__(self, idx) -> Tensor:
    idx = idx if isinstance(idx, tuple) else (idx,)
    if any(_is_tensor_index(i) for i in idx): return self._getitem_tensor(idx)
    return self._apply_basic(self._basic_plan(idx))
  def _basic_plan(self, idx: tuple) -> list:
    """Per index entry: ("new",) for None, ("keep", b, e, flip, stride) for a slice, ("drop", i) for an int; Ellipsis expanded."""
    n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if sum(1 for i in idx if i is Ellipsis) > 1: raise IndexError("an index can only have a single ellipsis")
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of dimension {self.ndim} (shape {self.shape})")
    if Ellipsis in idx:
      e = idx.index(Ellipsis)
      idx = idx[:e] + (slice(None),) * (self.ndim - n_real) + idx[e + 1:]
    else: idx = idx + (slice(None),) * (self.ndim - n_real)
    plan, dim = [], 0
    for i in idx:
      if i is None: plan.append(("new",)); continue
      s = self.shape[dim]
      if isinstance(i, UOp): raise TypeError("symbolic integer indices are not supported; use a slice with a bound Variable")
      if isinstance(i, bool) or not isinstance(i, (int, slice)) and not hasattr(i, "__index__"): raise TypeError(f"invalid index type {type(i).__name__}")
      if isinstance(i, slice):
        if isinstance(i.stop, UOp) or isinstance(i.start, UOp):
          if i.step not in (None, 1): raise ValueError("symbolic slices need step 1")
          plan.append(("keep", 0 if i.start is None else i.start, s if i.stop is None else i.stop, False, 1))
        else:
          start, stop, step = i.indices(s) if all_int((s,)) else (i.start or 0, i.stop if i.stop is not None else s, i.step or 1)
          if step == 0: raise ValueError("slice step cannot be zero")
          if step > 0: b, e = start, max(start, stop)
          else: b, e = stop + 1, max(stop + 1, start + 1)
          cnt = max(0, math.ceil((e - b) / abs(step)))
          if step < 0: b = max(b, start - (cnt - 1) * abs(step)) if cnt else b
          plan.append(("keep", b, e if cnt else b, step < 0, abs(step)))
      else:
        i = int(i)
        if not -s <= i < s: raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {s}")
        i = i + s if i < 0 else i
        plan.append(("drop", i))
      dim += 1
    return plan
  def _apply_basic(self, plan: list) -> Tensor:
    x, real = self, [p for p in plan if p[0] != "new"]
    if real: x = x.shrink(tuple((p[1], p[2]) if p[0] == "keep" else (p[1], p[1] + 1) for p in real))
    flips = [p[0] == "keep" and p[3] for p in real]
    if any(flips): x = x.flip(tuple(i for i, f in enumerate(flips) if f))
    strides = [p[4] if p[0] == "keep" else 1 for p in real]
    if any(st != 1 for st in strides):
      # stride by padding to a multiple, reshaping (n, st) and taking the first of each group
      shp = x.shape
      x = x.pad(tuple((0, (-s) % st) for s, st in zip(shp, strides)))
      x = x.reshape(flatten([(math.ceil(s / st), st) for s, st in zip(shp, strides)]))
      x = x.shrink(flatten([((0, math.ceil(s / st)), (0, 1)) for s, st in zip(shp, strides)]))
      x = x.reshape(tuple(math.ceil(s / st) for s, st in zip(shp, strides)))
    out_shape, it = [], iter(x.shape)
    for p in plan:
      if p[0] == "new": out_shape.append(1)
      elif p[0] == "keep": out_shape.append(next(it))
      else: next(it)
    return x.reshape(tuple(out_shape))
  def _unapply_basic(self, plan: list, v: Tensor, fill=0) -> Tensor:
    """The inverse of _apply_basic: put `v` (shaped like self[plan]) back where it came from in self's shape, `fill` elsewhere."""
    real = [p for p in plan if p[0] != "new"]
    mid = tuple(math.ceil((p[2] - p[1]) / p[4]) if p[0] == "keep" else 1 for p in real)
    x = v.reshape(mid)
    strides = [p[4] if p[0] == "keep" else 1 for p in real]
    if any(st != 1 for st in strides):
      full = tuple(p[2] - p[1] if p[0] == "keep" else 1 for p in real)
      x = x.reshape(flatten([(m, 1) for m in mid])).pad(flatten([((0, 0), (0, st - 1)) for st in strides]), value=fill)
      x = x.reshape(tuple(m * st for m, st in zip(mid, strides))).shrink(tuple((0, f) for f in full))
    flips = [p[0] == "keep" and p[3] for p in real]
    if any(flips): x = x.flip(tuple(i for i, f in enumerate(flips) if f))
    bounds = [(p[1], p[2]) if p[0] == "keep" else (p[1], p[1] + 1) for p in real]
    return x.pad(tuple((b, s - e) for (b, e), s in zip(bounds, self.shape)), value=fill)

  # ---- elementwise
  def _broadcasted(self, y, reverse=False, match_dtype=True) -> tuple[Tensor, Tensor]:
    x: Tensor = self
    if not isinstance(y, Tensor):
      if isinstance(y, UOp) and y.op in (Ops.BIND, Ops.DEFINE_VAR): y = Tensor(y.cast(dtypes.int32) if y.dtype != dtypes.int32 else y, device=x.device)
      else:
        if not isinstance(y, (bool, int, float)): raise TypeError(f"can't combine a Tensor with {type(y).__name__}")
        y = Tensor(UOp.const(_scalar_dtype_beside(y, x.dtype), y, x.device))   # multi: a device tuple makes a replicated const
    elif y.device != x.device: raise ValueError(f"tensors are on different devices: {x.device} and {y.device}")
    if reverse: x, y = y, x
    out_shape = _broadcast_shape(x.shape, y.shape)
    if match_dtype:
      dt = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(dt), y.cast(dt)
    return x._expand_to(out_shape), y._expand_to(out_shape)
  def _expand_to(self, shape) -> Tensor:
    if self.shape == shape: return self
    return self.reshape((1,) * (len(shape) - self.ndim) + self.shape).expand(shape)
  def _apply(self, op: Ops, *others: Tensor, dtype: DType | None = None) -> Tensor:
    rg = True if self.requires_grad or any(o.requires_grad for o in others) else None
    u = UOp(op, dtype or (dtypes.bool if op in GroupOp.Comparison else self.dtype), (self.uop, *[o.uop for o in others]))
    return Tensor(u, requires_grad=rg)
  def add(self, x, reverse=False) -> Tensor: a, b = self._broadcasted(x, reverse); return a._apply(Ops.ADD, b)
  def sub(self, x, reverse=False) -> Tensor: a, b = self._broadcasted(x, reverse); return a._apply(Ops.ADD, b._apply(Ops.NEG)) if not dtypes.is_unsigned(a.dtype) else a._apply(Ops.SUB, b)
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
  def __ne__(self, x): return self.ne(x)   # type: ignore[override]
  def __eq__(self, x): return self.eq(x)   # type: ignore[override]
  def logical_not(self) -> Tensor: return self.cast(dtypes.bool)._apply(Ops.CMPNE, Tensor(UOp.const(dtypes.bool, True, self.device))._expand_to(self.shape))
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
    shape = _broadcast_shape(cond.shape, x.shape)
    cond, x, y = cond._expand_to(shape), x._expand_to(shape), y._expand_to(shape)
    return cond._apply(Ops.WHERE, x, y, dtype=x.dtype)
  def maximum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a | b
    return a._apply(Ops.MAX, b)
  def minimum(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    if a.dtype == dtypes.bool: return a & b
    return -((-a).maximum(-b)) if not dtypes.is_unsigned(a.dtype) else (a < b).where(a, b)
  def clamp(self, min_=None, max_=None) -> Tensor:
    if min_ is None and max_ is None: raise ValueError("clamp needs min or max")
    x = self
    if min_ is not None: x = x.maximum(min_)
    if max_ is not None: x = x.minimum(max_)
    return x
  clip = clamp
  def cast(self, dtype) -> Tensor:
    dt = to_dtype(dtype)
    return self if self.dtype == dt else self._wrap(self.uop.cast(dt))
  def bitcast(self, dtype) -> Tensor:
    dt = to_dtype(dtype)
    if dt.itemsize != self.dtype.itemsize:
      if self.ndim == 0 or (self.shape[-1] * self.dtype.itemsize) % dt.itemsize: raise ValueError(f"can't bitcast {self.shape} of {self.dtype} to {dt}: the last dim's bytes don't divide")
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
      if x == 0: return self.ones_like()
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
  def _int_pow(self, n: int) -> Tensor:
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
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted({self._resolve_dim(a) for a in axes}))
  def _reduce(self, op: Ops, axis=None, keepdim=False) -> Tensor:
    axes = self._axes(axis)
    if any(self.shape[a] == 0 for a in axes):
      if op is Ops.MAX: raise ValueError(f"max/min of an empty dimension (shape {self.shape}, axis {axis}) has no identity")
      ident = 0 if op is Ops.ADD else 1
      out_shape = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
      ret = Tensor.full(out_shape, ident, dtype=self.dtype, device=self.device)
    else: ret = self._wrap(self.uop.r(op, axes))
    return ret if keepdim else ret.reshape(tuple(s for i, s in enumerate(self.shape) if i not in axes))
  def sum(self, axis=None, keepdim=False, dtype=None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    # half/bfloat16/fp8 add in float32 and round once at the end (as torch does): a half accumulator stops at 2048 ones
    if dtype is None and dtypes.is_float(acc) and acc.itemsize < 4: return self.cast(dtypes.float32)._reduce(Ops.ADD, axis, keepdim).cast(acc)
    return self.cast(acc)._reduce(Ops.ADD, axis, keepdim)
  def prod(self, axis=None, keepdim=False, dtype=None) -> Tensor:
    acc = to_dtype(dtype) if dtype is not None else sum_acc_dtype(self.dtype)
    return self.cast(acc)._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis=None, keepdim=False) -> Tensor:
    return self._reduce(Ops.MAX, axis, keepdim) if self.dtype != dtypes.bool else self.cast(dtypes.uint8)._reduce(Ops.MAX, axis, keepdim).cast(dtypes.bool)
  def min(self, axis=None, keepdim=False) -> Tensor:
    if dtypes.is_unsigned(self.dtype) or self.dtype == dtypes.bool:
      return (dtypes.max(self.dtype) - self.cast(self.dtype if self.dtype != dtypes.bool else dtypes.uint8)).max(axis, keepdim).__rsub__(dtypes.max(self.dtype) if self.dtype != dtypes.bool else 1).cast(self.dtype)
    return -((-self).max(axis, keepdim))
  def mean(self, axis=None, keepdim=False) -> Tensor:
    axes = self._axes(axis)
    n = prod([self.shape[a] for a in axes])
    out = self._float().sum(axis, keepdim)
    return out * (1 / n) if n else out * math.nan
  def var(self, axis=None, keepdim=False, correction=1) -> Tensor:
    axes = self._axes(axis)
    n = prod([self.shape[a] for a in axes])
    sq = (self._float() - self._float().mean(axis, keepdim=True)).square().sum(axis, keepdim)
    return sq / max(n - correction, 0)
  def std(self, axis=None, keepdim=False, correction=1) -> Tensor: return self.var(axis, keepdim, correction).sqrt()
  def any(self, axis=None, keepdim=False) -> Tensor: return self.bool().max(axis, keepdim)
  def all(self, axis=None, keepdim=False) -> Tensor: return self.logical_not().any(axis, keepdim).logical_not()

  # ---- linear algebra
  def dot(self, w: Tensor, dtype=None) -> Tensor:
    """Matrix product with numpy's rules: 1-d operands gain and then lose a dim, batch dims broadcast."""
    if not isinstance(w, Tensor): raise TypeError(f"matmul needs a Tensor, got {type(w).__name__}")
    if self.ndim == 0 or w.ndim == 0: raise ShapeError(f"matmul needs at least 1-d tensors, got shapes {self.shape} and {w.shape}")
    k, kw = self.shape[-1], (w.shape[-2] if w.ndim > 1 else w.shape[0])
    if k != kw: raise ShapeError(f"matmul shape mismatch: {self.shape} @ {w.shape} ({k} != {kw})")
    out_dt = least_upper_dtype(self.dtype, w.dtype) if dtype is None else to_dtype(dtype)
    if self.ndim == 1: return self.unsqueeze(0).dot(w, dtype).squeeze(-2 if w.ndim > 1 else -1)
    # the product's own dtype accumulates (half stays half): the tensor-core rewrites match that form
    acc = dtype if dtype is not None else sum_acc_dtype(least_upper_dtype(self.dtype, w.dtype))
    if w.ndim == 1: return (self * w).sum(-1, dtype=acc).cast(out_dt)
    try: _broadcast_shape(self.shape[:-2], w.shape[:-2])
    except ValueError: raise ShapeError(f"matmul batch dims don't broadcast: {self.shape} @ {w.shape}") from None
    x = self.unsqueeze(-2)                        # (..., n, 1, k)
    wt = w._panels(self).transpose(-1, -2).unsqueeze(-3)   # (..., 1, m, k)
    return (x * wt).sum(-1, dtype=acc).cast(out_dt)
  def _panels(self, x: Tensor) -> Tensor:
    """This right operand (K, N) of x @ self, read through a panel-major copy where the device asks for one
    (Renderer.matmul_panels) and the matmul is big enough to pay for the copy: the same values, a better layout."""
    if self.ndim != 2 or self.dtype != dtypes.float32 or x.dtype != dtypes.float32 or not isinstance(self.device, str): return self
    (K, N), M = self.shape, prod(x.shape[:-1])
    if not all(isinstance(v, int) for v in (K, N, M)): return self
    u = self.uop
    while u.op in GroupOp.Movement and u.op is not Ops.PERMUTE: u = u.src[0]
    transposed = u.op is Ops.PERMUTE and u.arg[-1] != len(u.arg) - 1
    from tinycore.device import Device
    # the device's own policy (Renderer.matmul_panels): whether the copy pays depends on its caches and vector width
    p = Device[self.device].renderer.matmul_panels(M, K, N, transposed)
    if not p or N % p: return self
    return self.reshape(K, N // p, p).permute(1, 0, 2).contiguous().permute(1, 0, 2).reshape(K, N)
  def matmul(self, x: Tensor, reverse=False, dtype=None) -> Tensor:
    if not isinstance(x, Tensor): x = Tensor(x, device=self.device)
    return x.dot(self, dtype=dtype) if reverse else self.dot(x, dtype=dtype)
  def linear(self, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    x = self.mul(weight) if weight.ndim == 1 else self.dot(weight)
    return x.add(bias) if bias is not None else x

  # ---- activations used everywhere (the full set lives in the activation mixin)
  def relu(self) -> Tensor: return (self < 0).where(0, self)   # keeps nan, like torch
  def sigmoid(self) -> Tensor: return (1 + (self * (-1 / math.log(2))).exp2()).reciprocal()
  def tanh(self) -> Tensor: return 2.0 * ((2.0 * self).sigmoid()) - 1.0
  def softmax(self, axis=-1, dtype=None) -> Tensor:
    x = self.cast(dtype) if dtype is not None else self._float()
    m = x - x.max(axis, keepdim=True).detach()
    e = m.exp()
    return e / e.sum(axis, keepdim=True)
  def softmin(self, axis=-1, dtype=None) -> Tensor: return (-self).softmax(axis, dtype)
  def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x / max(||x||_p over `dim`, eps), like torch.nn.functional.normalize."""
    x = self._float()
    norm = x.abs().pow(p).sum(dim, keepdim=True).pow(1 / p) if p != 2 else (x * x).sum(dim, keepdim=True).sqrt()
    return x / norm.maximum(eps)
  def newton_schulz(self, steps: int, params: tuple, eps: float = 1e-7) -> Tensor:
    """Orthogonalize the trailing matrices with an odd polynomial X <- sum_i params[i] * (X X^T)^i X, after scaling X
    to unit Frobenius norm (Muon's iteration uses params (3.4445, -4.7750, 2.0315)). Wide or tall: iterates on the
    short side."""
    x = self._float()
    tall = x.shape[-2] > x.shape[-1]
    if tall: x = x.transpose(-1, -2)
    x = x / ((x * x).sum((-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      a, term, out = x @ x.transpose(-1, -2), x, x * params[0]
      for c in params[1:]:
        term = a @ term
        out = out + term * c
      x = out
    return x.transpose(-1, -2) if tall else x
  def log_softmax(self, axis=-1, dtype=None) -> Tensor:
    x = self.cast(dtype) if dtype is not None else self._float()
    m = x - x.max(axis, keepdim=True).detach()
    return m - m.exp().sum(axis, keepdim=True).log()
  def logsumexp(self, axis=None, keepdim=False) -> Tensor:
    m = self.max(axis, keepdim=True).detach()
    # shift by 0 where the max is infinite: an all -inf row is then log(0) = -inf and a +inf row inf (torch), not NaN
    m = (m.abs() == math.inf).where(0, m)
    return (self - m).exp().sum(axis, keepdim=True).log().add(m).reshape(self._reduced_shape(axis, keepdim))
  def _reduced_shape(self, axis, keepdim) -> tuple:
    axes = self._axes(axis)
    return tuple(1 if i in axes else s for i, s in enumerate(self.shape)) if keepdim else tuple(s for i, s in enumerate(self.shape) if i not in axes)
  def sequential(self, ll: list[Callable[[Tensor], Tensor]]) -> Tensor: return functools.reduce(lambda x, f: f(x), ll, self)

  # ---- autograd
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None) -> list[Tensor]:
    from tinycore.gradient import compute_gradient
    _multi.check_grad(self.uop, *[t.uop for t in targets])   # multi: no autograd through shards yet
    if gradient is None and self.numel() != 1: raise ValueError(f"gradient of a non-scalar output of shape {self.shape} needs an explicit `gradient`")
    g = gradient if gradient is not None else Tensor.ones(*self.shape, device=self.device, dtype=self.dtype)
    grads = compute_gradient(self.uop, g.uop, {t.uop for t in targets})
    # a target the output doesn't depend on gets zeros (tinygrad 0.14): x**0 or an empty slice still has a gradient
    return [Tensor(grads[t.uop]) if t.uop in grads else t.zeros_like() for t in targets]
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    from tinycore.gradient import compute_gradient
    if gradient is None and self.numel() != 1: raise ValueError(f"backward of a non-scalar output of shape {self.shape} needs an explicit `gradient`")
    g = gradient if gradient is not None else Tensor.ones(*self.shape, device=self.device, dtype=self.dtype)
    targets = _grad_targets(self)
    if _multi.ACTIVE: _multi.check_backward(self.uop, [t.uop for t in list(_requires_grad_leaves) if t.requires_grad])   # multi: no autograd through shards yet
    grads = compute_gradient(self.uop, g.uop, {t.uop for t in targets})
    for t in targets:
      if (gu := grads.get(t.uop)) is None: continue
      gt = Tensor(gu, device=t.device)
      if gt.shape != t.shape: raise RuntimeError(f"gradient shape {gt.shape} doesn't match tensor shape {t.shape}")
      t.grad = gt if t.grad is None else (t.grad + gt)
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

# live tensors that require grad, so backward() can find its leaves
class _Leaves:
  """Live tensors that require grad, kept by identity: a WeakSet would compare two tensors with ==, which is elementwise."""
  def __init__(self): self.d: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
  def add(self, t: Tensor) -> None: self.d[id(t)] = t
  def __iter__(self): return iter(list(self.d.values()))
_requires_grad_leaves = _Leaves()
def _get_requires_grad(self) -> bool | None: return self._requires_grad
def _set_requires_grad(self, v: bool | None) -> None:
  # set in the constructor or later (`x.requires_grad = True`): either way backward() must find the tensor
  self._requires_grad = v
  if v: _requires_grad_leaves.add(self)
Tensor.requires_grad = property(_get_requires_grad, _set_requires_grad)  # type: ignore[assignment]

def _grad_targets(t: Tensor) -> list[Tensor]:
  nodes = set(t.uop.toposort())
  return [x for x in list(_requires_grad_leaves) if x.requires_grad and x.uop in nodes]

def _tensor_list(what: str, first, rest: tuple) -> tuple:
  """cat/stack's operands: `a.cat(b, c)`, `Tensor.cat(a, b)` or `Tensor.cat([a, b])`; a sequence and more tensors together is ambiguous."""
  if isinstance(first, (list, tuple)):
    if rest: raise ArgumentError(f"{what} takes tensors or one sequence of tensors, not a sequence followed by more tensors")
    tensors = tuple(first)
  else: tensors = (first, *rest)
  if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)): tensors = tuple(tensors[0])
  if not tensors: raise ArgumentError(f"{what} needs at least one tensor")
  if not all(isinstance(t, Tensor) for t in tensors): raise TypeError(f"{what} takes Tensors, got {[type(t).__name__ for t in tensors]}")
  return tensors

def _empty(device, shape: tuple, dtype: DType) -> UOp:
  return UOp(Ops.BUFFER, dtype, (), Buffer(device, prod(shape) if all_int(shape) else 0, dtype)).reshape(shape)

def _is_tensor_index(i) -> bool:
  # a tuple inside the index is a list of positions, as in torch and tinygrad: x[(0, 1), :] == x[[0, 1], :]
  return isinstance(i, (Tensor, list, tuple)) or (type(i).__module__ == "numpy" and getattr(i, "ndim", 0) > 0)

# ---- symbolic sizes at their bound values, for checks in the user's terms
def _bound_value(x) -> int | None:
  """The int a size has with its Variables at their bound values (None while one is unbound)."""
  if not isinstance(x, UOp): return x
  binds = [u for u in x.toposort() if u.op is Ops.BIND]
  r = x.substitute({b: b.src[1] for b in binds}).ssimplify()
  return r if isinstance(r, int) else None
def _bindings(*xs) -> str:
  names = {f"{u.src[0].arg[0]}={u.src[1].arg}" for x in xs if isinstance(x, UOp) for u in x.toposort() if u.op is Ops.BIND}
  return ", ".join(sorted(names)) or "no bound variables"
def _render_arg(x) -> str:
  if isinstance(x, UOp): return x.render()
  if isinstance(x, tuple): return "(" + ", ".join(_render_arg(y) for y in x) + ("," if len(x) == 1 else "") + ")"
  return repr(x)

def _shape_arg(shape, infer: bool = False) -> tuple:
  """A shape checked here, in the user's terms, before it reaches codegen: ints (numpy ints too) or symbolic sizes, none
  negative; `infer` lets reshape/expand use -1 for "the size that fits"."""
  if len(shape) == 1 and isinstance(shape[0], (tuple, list)): shape = tuple(shape[0])
  out = []
  for s in shape:
    if isinstance(s, UOp):
      if s.vmin < 0: raise ValueError(f"symbolic dimension {s.render()} can be negative (down to {s.vmin}) in shape {tuple(shape)}")
      out.append(s); continue
    if isinstance(s, bool) or not hasattr(s, "__index__"): raise ShapeEntryError(f"shape entries must be ints, got {s!r} in {tuple(shape)}")
    s = operator.index(s)
    if s < 0 and not (infer and s == -1): raise ValueError(f"negative dimension {s} in shape {tuple(shape)}")
    out.append(s)
  return tuple(out)

def _broadcast_shape(*shapes) -> tuple:
  n = max(len(s) for s in shapes)
  padded = [(1,) * (n - len(s)) + tuple(s) for s in shapes]
  out = []
  for dims in zip(*padded):
    nz = {d for d in dims if not (isinstance(d, int) and d == 1)}
    if len(nz) > 1: raise ValueError(f"shapes {' and '.join(str(tuple(s)) for s in shapes)} can't be broadcast together")
    out.append(nz.pop() if nz else 1)
  return tuple(out)
