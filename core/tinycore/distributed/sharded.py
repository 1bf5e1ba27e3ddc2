"""A tensor that spans ranks: every rank holds one slice along one axis, and the global shape is known to all.

This is the multi-process counterpart of `Tensor.shard` (which spreads one process's tensor over its own devices):
`distributed.shard(t, axis)` keeps this rank's part of `t`, `distributed.from_local(part, axis)` joins the parts the
ranks computed themselves. Ops that stay within a part run locally with no communication (elementwise ops on equally
sharded operands, a matmul whose sharded axis is not the contraction); those that need other ranks' parts say so in
their name or communicate once: `full()` gathers the whole tensor, a matmul over a sharded contraction axis multiplies
the local blocks and allreduces the partial products, a sum over the sharded axis allreduces the partial sums.

Parts follow numpy's array_split: the first `n % world_size` ranks hold one more row than the rest, so any length
splits (a rank may hold an empty part when there are fewer rows than ranks). There is no autograd through these ops."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.tensor import Tensor
from tinycore.distributed.collectives import allgather, allreduce
from tinycore.distributed.group import rank as _rank, world_size as _world_size

def split_sizes(n: int, parts: int) -> list[int]:
  """Rows per rank when `n` rows split over `parts` ranks (numpy.array_split's rule)."""
  return [n // parts + (1 if r < n % parts else 0) for r in range(parts)]

def _shape(t: Tensor, what: str) -> tuple[int, ...]:
  out = tuple(s for s in t.shape if isinstance(s, int))
  if len(out) != len(t.shape): raise ValueError(f"{what} needs a concrete shape, got {t.shape}")
  return out

def _axis(axis: int, ndim: int) -> int:
  if type(axis) is not int or not -ndim <= axis < ndim: raise ValueError(f"axis {axis!r} is out of range for a tensor of {ndim} dimensions")
  return axis % ndim

class RankSharded:
  """The global tensor of `shape`, split along `axis` over every rank; `local` is this rank's part. `sizes`: each
  rank's length along `axis` (default: split_sizes)."""
  def __init__(self, local: Tensor, axis: int, shape: tuple[int, ...], sizes: tuple[int, ...] | None = None):
    self.local, self.axis, self.shape = local, axis, tuple(shape)
    self.sizes = tuple(sizes) if sizes is not None else tuple(split_sizes(self.shape[axis], _world_size()))
    if len(self.sizes) != _world_size() or sum(self.sizes) != self.shape[axis]:
      raise ValueError(f"parts of lengths {self.sizes} don't split axis {axis} of a {self.shape} tensor over {_world_size()} ranks")
    want = self.shape[:axis] + (self.sizes[_rank()],) + self.shape[axis + 1:]
    if _shape(local, "RankSharded") != want:
      raise ValueError(f"rank {_rank()}'s part of a {self.shape} tensor split on axis {axis} has shape {want}, got {local.shape}")
  @property
  def dtype(self): return self.local.dtype
  @property
  def ndim(self) -> int: return len(self.shape)
  def __repr__(self): return f"<RankSharded {self.shape} {self.dtype} split on axis {self.axis}, rank {_rank()} holds {self.local.shape}>"

  def full(self) -> Tensor:
    """The whole tensor on every rank (an allgather of the parts)."""
    sizes = self.sizes
    big = max(sizes)
    part = self.local.transpose(0, self.axis) if self.axis else self.local   # allgather joins axis 0
    if (have := _shape(part, "full")[0]) < big: part = part.pad(((0, big - have),) + ((0, 0),) * (self.ndim - 1))
    gathered = allgather(part.contiguous())
    pieces = [gathered[r * big:r * big + n] for r, n in enumerate(sizes) if n]
    whole = pieces[0].cat(*pieces[1:]) if len(pieces) > 1 else pieces[0]
    return whole.transpose(0, self.axis) if self.axis else whole

  def numpy(self): return self.full().numpy()

  # ***** no communication: ops within the parts *****
  def _like(self, local: Tensor) -> RankSharded: return RankSharded(local, self.axis, self.shape, self.sizes)
  def _elementwise(self, other, fn) -> RankSharded:
    if isinstance(other, RankSharded):
      if (other.shape, other.axis, other.sizes) != (self.shape, self.axis, self.sizes):
        raise ValueError(f"elementwise op on a {self.shape} tensor split on axis {self.axis} and a {other.shape} tensor split on axis "
                         f"{other.axis}: both must have the same shape and split (gather one with .full() first)")
      return self._like(fn(self.local, other.local))
    if isinstance(other, Tensor): raise TypeError("an elementwise op between a RankSharded and a whole Tensor: shard the Tensor the same way first")
    return self._like(fn(self.local, other))
  def __add__(self, o): return self._elementwise(o, lambda a, b: a + b)
  def __sub__(self, o): return self._elementwise(o, lambda a, b: a - b)
  def __mul__(self, o): return self._elementwise(o, lambda a, b: a * b)
  def __truediv__(self, o): return self._elementwise(o, lambda a, b: a / b)
  __radd__, __rmul__ = __add__, __mul__
  def relu(self) -> RankSharded: return self._like(self.local.relu())
  def realize(self) -> RankSharded:
    self.local.realize()
    return self

  def sum(self, axis: int | None = None):
    """A whole Tensor when the sum runs over the split axis (partial sums allreduced), else a RankSharded."""
    if axis is None: return allreduce(self.local.sum().contiguous(), "sum")
    a = _axis(axis, self.ndim)
    if a == self.axis: return allreduce(self.local.sum(a).contiguous(), "sum")
    shape = self.shape[:a] + self.shape[a + 1:]
    return RankSharded(self.local.sum(a), self.axis - (a < self.axis), shape, self.sizes)

  # ***** matmul: local blocks, and an allreduce when the contraction axis is the split one *****
  def matmul(self, other) -> Tensor | RankSharded:
    if self.ndim != 2: raise ValueError(f"RankSharded matmul takes 2-d operands, got shape {self.shape}")
    if isinstance(other, RankSharded):
      if other.ndim != 2: raise ValueError(f"RankSharded matmul takes 2-d operands, got shape {other.shape}")
      if self.shape[1] != other.shape[0]: raise ValueError(f"matmul shape mismatch: {self.shape} @ {other.shape}")
      if (self.axis, other.axis) == (1, 0) and self.sizes != other.sizes:
        raise ValueError(f"matmul over a contraction axis split as {self.sizes} and as {other.sizes}: the splits must match")
      if (self.axis, other.axis) == (1, 0): return allreduce((self.local @ other.local).contiguous(), "sum")
      raise ValueError(f"matmul of tensors split on axes {self.axis} and {other.axis}: only a split contraction axis (1 and 0) "
                       "multiplies without a gather; gather one with .full() first")
    if not isinstance(other, Tensor): raise TypeError(f"matmul takes a Tensor or RankSharded, got {type(other).__name__}")
    oshape = _shape(other, "matmul")
    if len(oshape) != 2 or self.shape[1] != oshape[0]: raise ValueError(f"matmul shape mismatch: {self.shape} @ {oshape}")
    if self.axis == 0: return RankSharded(self.local @ other, 0, (self.shape[0], oshape[1]), self.sizes)   # rows stay split
    # the split axis is the contraction: this rank's rows of the whole right-hand side
    start = sum(self.sizes[:_rank()])
    return allreduce((self.local @ other[start:start + self.local.shape[1]]).contiguous(), "sum")
  __matmul__ = matmul
  def rmatmul(self, other: Tensor) -> RankSharded:
    """`other @ self`: whole (M, K) @ split-on-columns (K, N); the result's columns stay split. (`Tensor @ RankSharded`
    can't reach this: Tensor.__matmul__ doesn't defer to the right operand; use distributed.matmul.)"""
    if self.ndim != 2 or self.axis != 1: raise ValueError(f"Tensor @ RankSharded needs a 2-d right-hand side split on axis 1, got {self}")
    oshape = _shape(other, "matmul")
    if len(oshape) != 2 or oshape[1] != self.shape[0]: raise ValueError(f"matmul shape mismatch: {oshape} @ {self.shape}")
    return RankSharded(other @ self.local, 1, (oshape[0], self.shape[1]), self.sizes)

def matmul(a: Tensor | RankSharded, b: Tensor | RankSharded) -> Tensor | RankSharded:
  """a @ b where either operand may be split over the ranks."""
  if isinstance(a, RankSharded): return a.matmul(b)
  if isinstance(b, RankSharded): return b.rmatmul(a)
  return a @ b

def shard(t: Tensor, axis: int = 0) -> RankSharded:
  """This rank's part of `t` (the same whole tensor on every rank) split along `axis`."""
  if not isinstance(t, Tensor): raise TypeError(f"shard takes a Tensor, got {type(t).__name__}")
  shape = _shape(t, "shard")
  a = _axis(axis, len(shape))
  sizes = split_sizes(shape[a], _world_size())
  start = sum(sizes[:_rank()])
  index = tuple(slice(None) for _ in range(a)) + (slice(start, start + sizes[_rank()]),)
  return RankSharded(t[index].contiguous(), a, shape)

def from_local(part: Tensor, axis: int = 0) -> RankSharded:
  """The tensor whose part on each rank is that rank's `part`, joined in rank order along `axis` (any lengths; the other
  axes must match on every rank)."""
  if not isinstance(part, Tensor): raise TypeError(f"from_local takes a Tensor, got {type(part).__name__}")
  pshape = _shape(part, "from_local")
  a = _axis(axis, len(pshape))
  shapes = allgather(Tensor([list(pshape)], dtype=dtypes.int64, device=part.device)).numpy().tolist()   # one row per rank
  others = {tuple(s[:a] + s[a + 1:]) for s in shapes}
  if len(others) != 1: raise ValueError(f"from_local on axis {a}: the ranks' parts differ in their other axes: {shapes}")
  sizes = tuple(int(s[a]) for s in shapes)
  return RankSharded(part, a, pshape[:a] + (sum(sizes),) + pshape[a + 1:], sizes)
