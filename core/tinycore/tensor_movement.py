"""Movement: the checked primitive movement ops (reshape, expand, permute, flip, shrink, pad) and what is built from them:
cat/stack, squeeze/flatten, repeat, roll, split, unfold, diag, triangles, sliding windows (_pool), einsum."""
from __future__ import annotations
import math, itertools
from typing import TYPE_CHECKING
from tinycore.dtype import dtypes, to_dtype, least_upper_dtype
from tinycore.helpers import prod, make_tuple, flatten, all_int
from tinycore.tensor_base import TensorBase, tensor_type
from tinycore.tensor_errors import ArgumentError, ShapeError, UnsupportedModeError
from tinycore.tensor_shapes import bindings_text, bound_value, render_arg, shape_arg
if TYPE_CHECKING: from tinycore.tensor import Tensor

def _tensor_list(what: str, first, rest: tuple) -> tuple:
  """cat/stack's operands: `a.cat(b, c)`, `Tensor.cat(a, b)` or `Tensor.cat([a, b])`; a sequence and more tensors together is ambiguous."""
  Tensor = tensor_type()
  if isinstance(first, (list, tuple)):
    if rest: raise ArgumentError(f"{what} takes tensors or one sequence of tensors, not a sequence followed by more tensors")
    tensors = tuple(first)
  else: tensors = (first, *rest)
  if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)): tensors = tuple(tensors[0])
  if not tensors: raise ArgumentError(f"{what} needs at least one tensor")
  if not all(isinstance(t, Tensor) for t in tensors): raise TypeError(f"{what} takes Tensors, got {[type(t).__name__ for t in tensors]}")
  return tensors

class MovementMixin(TensorBase):
  __slots__ = ()

  # ---- primitive movement (argument checks here, in the user's terms)
  def reshape(self, shape, *args) -> Tensor:
    new = (shape,) + args if args or not isinstance(shape, (tuple, list)) else tuple(shape)
    # None keeps that dim (tinygrad): reshape((None, None, 6, 6)) on (4, 3, 6, 6)
    if any(s is None for s in new):
      if len(new) > self.ndim: raise ShapeError(f"reshape: None keeps a dim, but {new} has more dims than {self.shape}")
      new = tuple(self.shape[i] if s is None else s for i, s in enumerate(new))
    new = shape_arg(new, infer=True)
    if sum(1 for s in new if isinstance(s, int) and s == -1) > 1: raise ShapeError(f"only one dimension can be -1, got {new}")
    if -1 in new:
      known = prod(s for s in new if not (isinstance(s, int) and s == -1))
      if known == 0 or self.numel() % known != 0: raise ShapeError(f"can't reshape {self.shape} into {new}")
      new = tuple(self.numel() // known if (isinstance(s, int) and s == -1) else s for s in new)
    if any(isinstance(s, int) and s < 0 for s in new): raise ShapeError(f"negative dimension in reshape target {new}")
    if prod(new) != self.numel() if all_int(new) and all_int(self.shape) else False:
      raise ShapeError(f"can't reshape tensor of shape {self.shape} ({self.numel()} elements) into {new} ({prod(new)} elements)")
    if not (all_int(new) and all_int(self.shape)) and None not in (n := (bound_value(prod(new)), bound_value(prod(self.shape)))) and n[0] != n[1]:
      raise ValueError(f"can't reshape tensor of shape {render_arg(self.shape)} ({n[1]} elements) into {render_arg(new)} ({n[0]} elements) "
                       f"with {bindings_text(*new, *self.shape)}")
    return self._wrap(self.uop.reshape(new))
  def view(self, *shape) -> Tensor: return self.reshape(*shape)
  def expand(self, shape, *args) -> Tensor:
    new = shape_arg((shape,) + args if args or not isinstance(shape, (tuple, list)) else shape, infer=True)
    if len(new) < self.ndim: raise ShapeError(f"can't expand {self.shape} to fewer dimensions {new}")
    x = self.reshape((1,) * (len(new) - self.ndim) + self.shape) if len(new) != self.ndim else self
    new = tuple(xs if (isinstance(n, int) and n == -1) else n for xs, n in zip(x.shape, new))
    for xs, n in zip(x.shape, new):
      if not (xs == n or xs == 1): raise ShapeError(f"can't expand {self.shape} to {new}: dimension of size {xs} is not 1")
    return x._wrap(x.uop.expand(new))
  def permute(self, order, *args) -> Tensor:
    order = tuple(order) if not isinstance(order, int) else (order,) + args
    order = tuple(self._resolve_dim(o) for o in order)
    if sorted(order) != list(range(self.ndim)):
      raise ShapeError(f"permute order {order} is not a permutation of the {self.ndim} dims of {self.shape}")
    return self._wrap(self.uop.permute(order))
  def transpose(self, dim0=1, dim1=0) -> Tensor:
    if self.ndim < 2 and dim0 == 1 and dim1 == 0: return self
    order = list(range(self.ndim))
    d0, d1 = self._resolve_dim(dim0), self._resolve_dim(dim1)
    order[d0], order[d1] = order[d1], order[d0]
    return self.permute(order)
  def flip(self, axis, *args) -> Tensor:
    given = [self._resolve_dim(a) for a in ((axis,) + args if isinstance(axis, int) else axis)]
    if len(set(given)) != len(given):
      raise ArgumentError(f"flip dims {tuple((axis,) + args if isinstance(axis, int) else axis)} name a dim twice (shape {self.shape})")
    axes = set(given)
    return self._wrap(self.uop.flip(tuple(i in axes for i in range(self.ndim))))
  def shrink(self, arg) -> Tensor:
    if len(arg) != self.ndim: raise ValueError(f"shrink needs {self.ndim} (start, end) pairs for shape {self.shape}, got {len(arg)}")
    arg = tuple((0, s) if a is None else a for a, s in zip(arg, self.shape))
    for (b, e), s in zip(arg, self.shape):
      if all_int((b, e, s)) and not 0 <= b <= e <= s: raise ValueError(f"shrink {arg} is out of bounds for shape {self.shape}")
      # a symbolic bound is checked at its bound value here (and at every run, engine/run.py): a kernel never reads past a buffer
      if not all_int((b, e, s)) and None not in (vals := tuple(bound_value(x) for x in (b, e, s))) and not 0 <= vals[0] <= vals[1] <= vals[2]:
        raise ValueError(f"shrink {render_arg(arg)} is out of bounds for shape {render_arg(self.shape)} with {bindings_text(b, e, s)}: "
                         f"({vals[0]}, {vals[1]}) is not inside 0..{vals[2]}")
    return self._wrap(self.uop.shrink(arg))
  def pad(self, padding, mode: str = "constant", value: float = 0.0) -> Tensor:
    """`padding` as ((before, after), ...) per dim, or flat torch style (last dim first: (left, right, top, bottom, ...))."""
    Tensor = tensor_type()
    if all(isinstance(p, int) for p in padding):
      if len(padding) % 2 or len(padding) // 2 > self.ndim:
        raise ArgumentError(f"flat padding {padding} must have an even length at most 2*{self.ndim}")
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
      if not isinstance(n, int): raise ShapeError(f"{mode} padding needs a concrete size for dim {d}, got {render_arg(n)}")
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
    Tensor = tensor_type()
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
  def cat_(self, *args, dim=0) -> Tensor:
    Tensor = tensor_type()
    return Tensor.cat(self, *args, dim=dim)
  def stack(self, *args: Tensor, dim: int = 0) -> Tensor:
    Tensor = tensor_type()
    tensors = _tensor_list("stack", self, args)
    return Tensor.cat(*[t.unsqueeze(dim) for t in tensors], dim=dim)
  def _pool_last(self, k: int) -> Tensor:
    """Sliding windows of size k (stride 1) over the last axis (length L = n + k): shape (..., n, k), out[i, j] = x[i + j]."""
    L = self.shape[-1]; n = L - k
    pre = self.shape[:-1]
    # repeat then reshape trick: (.., L) -> (.., k+1 copies) -> flat -> shrink -> (.., k, L+1) ... take window rows
    x = self.unsqueeze(-2).expand(*pre, n + 1, L).reshape(*pre, (n + 1) * L)
    x = x.shrink(tuple((0, s) for s in pre) + ((0, n * (L + 1)),)).reshape(*pre, n, L + 1)
    return x.shrink(tuple((0, s) for s in pre) + ((0, n), (0, k)))

  @staticmethod
  def linspace(start, stop, steps: int, dtype=None, **kw):
    Tensor = tensor_type()
    if not isinstance(steps, int) or steps < 0: raise ValueError(f"linspace steps must be a non-negative int, got {steps!r}")
    dt = to_dtype(dtype) if dtype is not None else dtypes.default_float
    if dt == dtypes.bool: raise ArgumentError("linspace can't make bool values (torch and tinygrad refuse it too)")
    if steps == 0: return Tensor.empty(0, dtype=dt, **kw)
    if steps == 1: return Tensor.full((1,), start, dtype=dt, **kw)
    idx = Tensor._index_range(steps, kw.get("device")).cast(dtypes.float64 if dt == dtypes.float64 else dtypes.float32)
    out = idx * ((stop - start) / (steps - 1)) + start
    return Tensor(out.cast(dt).uop, requires_grad=kw.get("requires_grad"))

  def repeat(self, repeats, *args):
    """Tile the whole tensor: shape (s0, s1) with repeats (a, b) -> (a*s0, b*s1); extra leading repeats add dims."""
    reps = tuple(repeats) if isinstance(repeats, (tuple, list)) else (repeats,) + args
    if len(reps) < self.ndim: raise ValueError(f"repeat needs at least {self.ndim} repeats for shape {self.shape}, got {reps}")
    if any(not isinstance(r, int) or r < 0 for r in reps): raise ValueError(f"repeats must be non-negative ints, got {reps}")
    base = (1,) * (len(reps) - self.ndim) + tuple(self.shape)
    x = self.reshape(flatten([(1, s) for s in base])).expand(flatten([(r, s) for r, s in zip(reps, base)]))
    return x.reshape(tuple(r * s for r, s in zip(reps, base)))
  def repeat_interleave(self, repeats: int, dim: int | None = None):
    if not isinstance(repeats, int) or repeats < 0: raise ValueError(f"repeat_interleave needs a non-negative int repeats, got {repeats!r}")
    x = self.flatten() if dim is None else self
    d = 0 if dim is None else x._resolve_dim(dim)
    x = x.unsqueeze(d + 1)
    return x.expand(*x.shape[:d + 1], repeats, *x.shape[d + 2:]).flatten(d, d + 1)

  def roll(self, shifts: int | tuple[int, ...], dims: int | tuple[int, ...] | None = None) -> Tensor:
    if dims is None:
      if len(make_tuple(shifts, 1)) != 1: raise ArgumentError(f"roll without dims takes one shift (it rolls the flattened tensor), got {shifts}")
      return self.flatten().roll(make_tuple(shifts, 1)[0], 0).reshape(self.shape)
    shifts, dims = make_tuple(shifts, 1), make_tuple(dims, 1)
    if len(shifts) != len(dims): raise ArgumentError(f"roll needs as many shifts as dims, got {shifts} and {dims}")
    x = self
    for s, d in zip(shifts, dims):
      d = x._resolve_dim(d)
      n = x.shape[d]
      if n == 0 or (s := s % n) == 0: continue
      x = x._slice_dim(d, n - s, n).cat(x._slice_dim(d, 0, n - s), dim=d)
    return x

  def split(self, sizes, dim: int = 0):
    d = self._resolve_dim(dim)
    n = self.shape[d]
    if isinstance(sizes, int):
      if sizes <= 0: raise ValueError(f"split size must be positive, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] or [0]
    elif sum(sizes) != n: raise ValueError(f"split sizes {list(sizes)} don't sum to {n}, the size of dim {d} of {self.shape}")
    offs = list(itertools.accumulate(sizes, initial=0))
    return tuple(self._slice_dim(d, offs[i], offs[i + 1]) for i in range(len(sizes)))
  def chunk(self, chunks: int, dim: int = 0):
    if not isinstance(chunks, int) or chunks <= 0: raise ValueError(f"chunk needs a positive number of chunks, got {chunks!r}")
    n = self.shape[self._resolve_dim(dim)]
    return self.split(max(1, math.ceil(n / chunks)), dim) if n else (self,) * 1
  def unbind(self, dim: int = 0):
    d = self._resolve_dim(dim)
    return tuple(self._slice_dim(d, i, i + 1).squeeze(d) for i in range(self.shape[d]))

  def meshgrid(self, *args: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """`a.meshgrid(b, c)` or `Tensor.meshgrid(a, b, c)`: one grid per input, each of shape (len(a), len(b), ...) for
    "ij" (the first two swapped for "xy"); a 0-d input counts as one element, like torch."""
    tensors = tuple(self) if isinstance(self, (list, tuple)) else (self, *args)
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)): tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"): raise ArgumentError(f"meshgrid indexing must be 'ij' or 'xy', not {indexing!r}")
    for t in tensors:
      if t.ndim > 1: raise ShapeError(f"meshgrid takes 0-d or 1-d tensors, got shape {t.shape}")
    ts = [t.reshape(1) if t.ndim == 0 else t for t in tensors]
    if indexing == "xy" and len(ts) >= 2: ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.shape[0] for t in ts)
    out = [t.reshape(tuple(-1 if i == j else 1 for j in range(len(ts)))).expand(shape) for i, t in enumerate(ts)]
    if indexing == "xy" and len(ts) >= 2: out[0], out[1] = out[1], out[0]   # ij of (y, x), outputs swapped back
    return tuple(out)

  def _tri_mask(self, diagonal: int, upper: bool):
    Tensor = tensor_type()
    if self.ndim < 2: raise ValueError(f"triu/tril need at least 2 dims, got shape {self.shape}")
    r, c = self.shape[-2:]
    ri = Tensor._index_range(r, self.device).reshape(r, 1)
    ci = Tensor._index_range(c, self.device).reshape(1, c)
    return (ci - ri >= diagonal) if upper else (ci - ri <= diagonal)
  def triu(self, diagonal: int = 0): return self._tri_mask(diagonal, True).where(self, 0).cast(self.dtype)
  def tril(self, diagonal: int = 0): return self._tri_mask(diagonal, False).where(self, 0).cast(self.dtype)

  def diag(self):
    """1-d -> square matrix with it on the diagonal; 2-d -> its main diagonal."""
    Tensor = tensor_type()
    if self.ndim == 1:
      n = self.shape[0]
      return Tensor.eye(n, dtype=dtypes.bool, device=self.device).where(self.reshape(1, n), 0).cast(self.dtype)
    if self.ndim == 2:
      m = min(self.shape)
      if m == 0: return self.reshape(-1)[:0]
      # the diagonal of a square block is every (n+1)-th element of its flattening
      sq = self.shrink(((0, m), (0, m))).flatten().pad(((0, m),))
      return sq.reshape(m, m + 1)[:, 0]
    raise ValueError(f"diag needs a 1-d or 2-d tensor, got shape {self.shape}")

  # ---- sliding windows
  def _pool(self, k_: tuple, stride=1, dilation=1):
    """Sliding windows over the last len(k_) dims: (*pre, *i_) -> (*pre, *o_, *k_) with o = (i - d*(k-1) - 1)//s + 1."""
    d_ = len(k_)
    if self.ndim < d_: raise ValueError(f"can't pool {d_} dims of a tensor with shape {self.shape}")
    s_, dl_ = make_tuple(stride, d_), make_tuple(dilation, d_)
    pre, i_ = self.shape[:-d_], self.shape[-d_:]
    o_ = tuple((i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(i_, k_, s_, dl_))
    for i, k, o in zip(i_, k_, o_):
      if k <= 0 or o <= 0: raise ShapeError(f"window {k_} (dilation {dl_}) doesn't fit in input of spatial size {i_}")
    x = self
    for j in range(d_):   # each window step turns one axis into an (o, k) pair
      x = x._window_axis(len(pre) + 2 * j, k_[j], s_[j], dl_[j], o_[j])
    # x is (*pre, o0, k0, o1, k1, ...) -> (*pre, *o_, *k_)
    n = len(pre)
    return x.permute(tuple(range(n)) + tuple(n + 2 * j for j in range(d_)) + tuple(n + 2 * j + 1 for j in range(d_)))
  def _window_axis(self, ax: int, k: int, s: int, d: int, o: int):
    """Replace axis `ax` (size i) by two axes (o, k) with out[a, b] = x[a*s + b*d]."""
    A, i, B = self.shape[:ax], self.shape[ax], self.shape[ax + 1:]
    keep = tuple((0, v) for v in A), tuple((0, v) for v in B)
    if d == 1 and k <= s:
      # non-overlapping windows: pad/shrink to o*s, split into (o, s), keep the first k
      x = self._slice_dim(ax, 0, min(i, o * s)).pad(tuple((0, 0) for _ in A) + ((0, max(0, o * s - i)),) + tuple((0, 0) for _ in B))
      x = x.reshape(*A, o, s, *B)
      return x.shrink(keep[0] + ((0, o), (0, k)) + keep[1])
    # overlapping: repeat the axis e times, view rows of length L with L = d (mod i), so row r starts at x[r*d]
    L = i + d + i * max(0, math.ceil((o * s - i - d) / i))
    e = math.ceil(k * L / i)
    x = self.unsqueeze(ax).expand(*A, e, i, *B).reshape(*A, e * i, *B)
    x = x.shrink(keep[0] + ((0, k * L),) + keep[1]).reshape(*A, k, L, *B)
    x = x.shrink(keep[0] + ((0, k), (0, o * s)) + keep[1]).reshape(*A, k, o, s, *B)
    x = x.shrink(keep[0] + ((0, k), (0, o), (0, 1)) + keep[1]).reshape(*A, k, o, *B)
    return x.transpose(len(A), len(A) + 1)

  def unfold(self, dimension: int, size: int, step: int) -> Tensor:
    """torch.Tensor.unfold: windows of `size` every `step` along `dimension`; windows replace it, the window is the new last dim."""
    d = self._resolve_dim(dimension)
    if size < 0 or step <= 0: raise ArgumentError(f"unfold needs size >= 0 and step > 0, got size {size} and step {step}")
    if size > self.shape[d]: raise ShapeError(f"unfold size {size} exceeds dimension {d} of size {self.shape[d]} (shape {self.shape})")
    if size == 0:   # (n - 0) // step + 1 windows, each empty: nothing to read (detached: its gradient is zeros)
      return self.detach().unsqueeze(-1)._slice_dim(self.ndim, 0, 0).reshape(*self.shape[:d], self.shape[d] // step + 1, *self.shape[d + 1:], 0)
    x = self.transpose(d, -1) if d != self.ndim - 1 else self
    w = x._pool((size,), step)                      # (..., o, size) with dim d at the end
    return w.transpose(d, -2) if d != self.ndim - 1 else w

  # ---- einsum
  @staticmethod
  def einsum(formula: str, *operands: Tensor, dtype=None) -> Tensor:
    """Einstein summation as torch.einsum: '...' for broadcast dims (first in an implicit output), a letter repeated in
    one operand takes its diagonal, letters missing from the output are summed. Every operand is broadcast onto the
    union of the letters, multiplied, and reduced."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)): operands = tuple(operands[0])
    f = formula.replace(" ", "")
    lhs, arrow, rhs = f.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(operands): raise ArgumentError(f"einsum {formula!r} names {len(ins)} operands, got {len(operands)}")
    for s_ in ins + ([rhs] if arrow else []):
      if s_.count("...") > 1: raise ArgumentError(f"einsum {formula!r}: '...' appears more than once in {s_!r}")
      if not s_.replace("...", "").isalpha() and s_.replace("...", ""):
        raise ArgumentError(f"einsum {formula!r}: subscripts must be letters, got {s_!r}")
    # '...' becomes fresh capital letters, aligned from the right (operands may cover fewer of them)
    n_ell = 0
    for s_, t in zip(ins, operands):
      n = t.ndim - len(s_.replace("...", ""))
      if n < 0 or (n > 0 and "..." not in s_): raise ShapeError(f"einsum operand {s_!r} doesn't match a tensor of shape {t.shape}")
      n_ell = max(n_ell, n)
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in f][:n_ell]
    subs: list[list[str]] = []
    xs: list[Tensor] = []
    sizes: dict[str, int] = {}
    for s_, t in zip(ins, operands):
      k = t.ndim - len(s_.replace("...", ""))
      sub = list(s_.replace("...", "".join(free[n_ell - k:])))
      # a repeated letter: the diagonal over its two dims, which becomes a new last dim named by that letter
      while (rep := next((c for c in sub if sub.count(c) > 1), None)) is not None:
        p1 = sub.index(rep); p2 = sub.index(rep, p1 + 1)
        if t.shape[p1] != t.shape[p2]:
          raise ShapeError(f"einsum {formula!r}: {rep!r} repeats in {s_!r} over dims of sizes {t.shape[p1]} and {t.shape[p2]}")
        t = t.diagonal(0, p1, p2)
        sub = [c for i, c in enumerate(sub) if i not in (p1, p2)] + [rep]
      for c, n in zip(sub, t.shape):
        if c in sizes and sizes[c] != n and 1 not in (n, sizes[c]):
          raise ShapeError(f"einsum {formula!r}: {c!r} has size {sizes[c]} in one operand and {n} in another")
        if sizes.get(c, 1) == 1: sizes[c] = n
      subs.append(sub); xs.append(t)
    if arrow:
      out = list(rhs.replace("...", "".join(free)))
      for c in out:
        if c not in sizes: raise ArgumentError(f"einsum output letter {c!r} is not in any input of {formula!r}")
      if len(set(out)) != len(out): raise ArgumentError(f"einsum {formula!r}: an output letter repeats")
    else:
      allsub = [c for sub in subs for c in sub]
      out = free + sorted(c for c in set(allsub) if allsub.count(c) == 1 and c not in free)
    letters = out + sorted(set(c for sub in subs for c in sub) - set(out))
    full = None
    for sub, t in zip(subs, xs):
      order = sorted(range(len(sub)), key=lambda i: letters.index(sub[i]))
      t = t.permute(order) if order else t
      have = [sub[i] for i in order]
      t = t.reshape(tuple(t.shape[have.index(c)] if c in have else 1 for c in letters))
      full = t if full is None else full * t
    if full is None: raise ArgumentError(f"einsum {formula!r} needs at least one operand")
    full = full.expand(tuple(sizes[c] for c in letters)) if letters else full
    out_dt = to_dtype(dtype) if dtype is not None else least_upper_dtype(*[t.dtype for t in operands])
    red = tuple(range(len(out), len(letters)))
    return (full.sum(red) if red else full).cast(out_dt)


  def rearrange(self, formula: str, **sizes):
    """einops-style axis rearrangement: 'b c (h p) w -> b (c p) h w', p=2. Names, groups in (), '...' and '1'."""
    def err(msg): return ValueError(f"rearrange {formula!r}: {msg}")
    def parse(side: str) -> list:   # a bare axis is a list, a (group) a tuple: '...' and '(...)' differ on the right
      out: list[list[str] | tuple[str, ...]] = []
      group: list[str] | None = None
      for tok in side.replace("(", " ( ").replace(")", " ) ").split():
        if tok == "(":
          if group is not None: raise err("nested parentheses")
          group = []
        elif tok == ")":
          if group is None: raise err("unbalanced ')'")
          out.append(tuple(group)); group = None
        elif tok not in ("...", "1") and not tok.isidentifier(): raise err(f"bad axis name {tok!r}")
        elif group is not None: group += [] if tok == "1" else [tok]
        else: out.append([] if tok == "1" else [tok])
      if group is not None: raise err("unbalanced '('")
      return out
    if formula.count("->") != 1: raise ValueError(f"rearrange needs exactly one '->', got {formula!r}")
    lhs, rhs = (parse(s) for s in formula.split("->"))
    names = lambda side: [n for g in side for n in g]
    if sorted(names(lhs)) != sorted(names(rhs)) or len(set(names(lhs))) != len(names(lhs)): raise err("both sides must name the same axes, each once")
    if any("..." in g and g != ["..."] for g in lhs): raise err("'...' on the left must stand alone, not in a group")
    if (bad := set(sizes) - set(names(lhs))): raise err(f"sizes given for unknown axes {sorted(bad)}")
    has_ell = ["..."] in lhs
    if (self.ndim < len(lhs) - 1) if has_ell else (self.ndim != len(lhs)):
      raise err(f"the left side has {len(lhs)} axes, the tensor {self.ndim} ({self.shape})")
    ell = [f"...{i}" for i in range(self.ndim - len(lhs) + 1)] if has_ell else []
    known, dims, d = dict(sizes), [], 0
    for g in lhs:
      if g == ["..."]:
        known.update(zip(ell, self.shape[d:d + len(ell)])); dims += ell; d += len(ell); continue
      if len(unknown := [n for n in g if n not in known]) > 1: raise err(f"can't infer {unknown} from dim {self.shape[d]}: give all but one")
      rest = prod(known[n] for n in g if n in known)
      if unknown:
        if rest == 0 or self.shape[d] % rest: raise err(f"dim {self.shape[d]} isn't divisible by {rest}")
        known[unknown[0]] = self.shape[d] // rest
      if prod(known[n] for n in g) != self.shape[d]: raise err(f"({' '.join(g)}) is {prod(known[n] for n in g)}, but the dim is {self.shape[d]}")
      dims += g; d += 1
    out_groups: list[list[str]] = []
    for g in rhs: out_groups += [[e] for e in ell] if g == ["..."] else [[e for n in g for e in (ell if n == "..." else [n])]]
    x = self.reshape(tuple(known[n] for n in dims)).permute(tuple(dims.index(n) for g in out_groups for n in g))
    return x.reshape(tuple(prod(known[n] for n in g) for g in out_groups))

  def pad_to(self, shape, *args, value=0):
    """Pad at the end of each dim up to `shape` (None keeps a dim)."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) != self.ndim: raise ValueError(f"pad_to shape {shape} has {len(shape)} dims, the tensor {self.ndim} ({self.shape})")
    if any(t is not None and t < s for s, t in zip(self.shape, shape)): raise ValueError(f"pad_to can't shrink {self.shape} to {shape}")
    return self.pad(tuple((0, 0 if t is None else t - s) for s, t in zip(self.shape, shape)), value=value)
  def shrink_to(self, shape, *args):
    """Keep the first `shape` elements of each dim (None keeps a dim)."""
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
    if len(shape) != self.ndim: raise ValueError(f"shrink_to shape {shape} has {len(shape)} dims, the tensor {self.ndim} ({self.shape})")
    if any(t is not None and t > s for s, t in zip(self.shape, shape)): raise ValueError(f"shrink_to can't grow {self.shape} to {shape}")
    return self.shrink(tuple((0, s if t is None else t) for s, t in zip(self.shape, shape)))

  # ---- views
  def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the (dim1, dim2) planes (above it for offset > 0), as a new last dim: torch.diagonal."""
    d1, d2 = self._resolve_dim(dim1), self._resolve_dim(dim2)
    if d1 == d2: raise ArgumentError(f"diagonal dims must differ, got dim1={dim1} and dim2={dim2} (shape {self.shape})")
    rest = [i for i in range(self.ndim) if i not in (d1, d2)]
    x = self.permute(rest + [d1, d2])
    r, c = x.shape[-2:]
    x = x[..., :, offset:] if offset >= 0 else x[..., -offset:, :]
    r, c = x.shape[-2:]
    n, pre = min(r, c), x.shape[:-2]
    if n == 0: return x.reshape(*pre, -1)[..., :0] if prod(pre) else x.reshape(*pre, 0)
    # element (i, i) of an (n, c) block is entry i*(c+1) of its flattening: pad to n*(c+1) and keep column 0 of (n, c+1)
    flat = x[..., :n, :].reshape(*pre, n * c).pad(tuple((0, 0) for _ in pre) + ((0, n),))
    return flat.reshape(*pre, n, c + 1)[..., 0]
