"""Data-dependent selection, written as one-hot comparisons against an arange plus a reduce so that it stays lazy and fuses:
advanced indexing, __setitem__, gather/scatter, one_hot, masked ops, cumulative scans, argmax, sort/topk."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING
from tinycore.dtype import dtypes, sum_acc_dtype
from tinycore.helpers import all_int, flatten
from tinycore.uop import UOp, Ops
from tinycore.tensor_base import TensorBase, tensor_type
from tinycore.tensor_errors import ArgumentError, DTypeError, ShapeError
from tinycore.tensor_shapes import broadcast_shape
if TYPE_CHECKING: from tinycore.tensor import Tensor

def _as_index_tensor(i, device):
  """A list / numpy array / Tensor index as an int Tensor (bool masks become the positions of their True entries)."""
  Tensor = tensor_type()
  import numpy as np
  if isinstance(i, Tensor):
    if i.dtype == dtypes.bool: return Tensor(np.nonzero(i.numpy().reshape(-1))[0].astype(np.int32), device=device), i.shape
    if not dtypes.is_int(i.dtype): raise IndexError(f"tensors used as indices must be integer or bool, got {i.dtype}")
    return i, None
  arr = np.asarray(i)
  if arr.dtype == bool: return Tensor(np.nonzero(arr.reshape(-1))[0].astype(np.int32), device=device), arr.shape
  if arr.size and arr.dtype.kind not in "iu": raise IndexError(f"arrays used as indices must be integer or bool, got {arr.dtype}")
  return Tensor(arr.astype(np.int32), device=device), None

def _check_bounds(t, size: int, dim: int):
  """Bounds-check an index tensor whose values are known without running a kernel (built from a list/numpy array)."""
  if t.uop.base.op is Ops.BUFFER and t.numel() and all_int(t.shape):
    v = t.numpy()
    if v.min() < -size or v.max() >= size:
      bad = v[(v < -size) | (v >= size)].reshape(-1)[0]
      raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")

def _is_tensor_index(i) -> bool:
  Tensor = tensor_type()
  # a tuple inside the index is a list of positions, as in torch and tinygrad: x[(0, 1), :] == x[[0, 1], :]
  return isinstance(i, (Tensor, list, tuple)) or (type(i).__module__ == "numpy" and getattr(i, "ndim", 0) > 0)

def _is_extreme(x, m):
  """Where x equals its row's max/min m. A row holding NaN has m = NaN (it propagates, as in torch), which equals
  nothing: there the NaNs are the extremes, so argmax/argmin give the first NaN's index, like torch."""
  return (x == m) | (x != x) if dtypes.is_float(x.dtype) else x == m

class IndexingMixin(TensorBase):
  __slots__ = ()

  # ---- basic indexing (ints, slices with steps, None, Ellipsis; tensor indices in _getitem_tensor)
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
      if isinstance(i, bool) or not isinstance(i, (int, slice)) and not hasattr(i, "__index__"):
        raise TypeError(f"invalid index type {type(i).__name__}")
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

  # ---- advanced indexing
  def _getitem_tensor(self, idx: tuple):
    """numpy semantics: the tensor indices broadcast together to B; B replaces the indexed dims in place when the advanced
    indices (ints included) are adjacent in the index, else goes first."""
    Tensor = tensor_type()
    if sum(1 for i in idx if i is Ellipsis) > 1: raise IndexError("an index can only have a single ellipsis")
    # bool masks span as many dims as they have; expand them to one position index per dim
    norm, n_real = [], sum(1 for i in idx if i is not None and i is not Ellipsis)
    def ndims(i) -> int:   # how many of self's dims an index entry consumes
      if i is None or i is Ellipsis: return 0
      if isinstance(i, Tensor) and i.dtype == dtypes.bool: return max(i.ndim, 1)
      if isinstance(i, (list, tuple)) or type(i).__module__ == "numpy":
        import numpy as np
        a = np.asarray(i)
        return max(a.ndim, 1) if a.dtype == bool else 1
      return 1
    ell_at = next((k for k, i in enumerate(idx) if i is Ellipsis), None)
    for k, i in enumerate(idx):
      if _is_tensor_index(i):
        t, mask_shape = _as_index_tensor(i, self.device)
        if mask_shape is not None:
          # a bool mask must match the dims it covers (torch): a shorter one is not silently a list of positions
          first = sum(ndims(j) for j in idx[:k]) if ell_at is None or ell_at > k else self.ndim - sum(ndims(j) for j in idx[k:])
          covered = tuple(self.shape[first:first + len(mask_shape)])
          if tuple(mask_shape) != covered:
            raise IndexError(f"boolean mask of shape {tuple(mask_shape)} doesn't match the indexed dims {covered} of {self.shape} (from dim {first})")
        if mask_shape is not None and len(mask_shape) > 1:
          flat = t.numpy()
          import numpy as np
          for c in np.unravel_index(flat, mask_shape): norm.append(Tensor(c.astype(np.int32), device=self.device))
          n_real += len(mask_shape) - 1
          continue
        norm.append(t)
      else: norm.append(i)
    idx = tuple(norm)
    if n_real > self.ndim: raise IndexError(f"too many indices for tensor of dimension {self.ndim} (shape {self.shape})")
    ell = [k for k, i in enumerate(idx) if i is Ellipsis]   # `in`/.index would call Tensor.__eq__
    if ell:
      e = ell[0]
      idx = idx[:e] + (slice(None),) * (self.ndim - n_real) + idx[e + 1:]
    else: idx = idx + (slice(None),) * (self.ndim - n_real)
    # basic part: tensors become full slices; remember where their dims land in the result of the basic indexing
    basic, tpos, tens, out_dim, in_dim = [], [], [], 0, 0
    for i in idx:
      if isinstance(i, Tensor):
        _check_bounds(i, self.shape[in_dim], in_dim)
        basic.append(slice(None)); tpos.append(out_dim); tens.append((i, self.shape[in_dim]))
        out_dim += 1; in_dim += 1
      elif i is None: basic.append(None); out_dim += 1
      else:
        basic.append(i)
        if isinstance(i, slice): out_dim += 1
        in_dim += 1
    x = self._apply_basic(self._basic_plan(tuple(basic)))
    B = broadcast_shape(*[t.shape for t, _ in tens])
    # one-hot per indexed dim, combined into a mask over (*B, s_1..s_k)
    mask = None
    for j, (t, s) in enumerate(tens):
      t = (t < 0).where(t + s, t)._expand_to(B)
      oh = t.reshape(*B, *[1] * j, 1, *[1] * (len(tens) - j - 1)) == \
        Tensor._index_range(s, self.device).reshape(*[1] * (len(B) + j), s, *[1] * (len(tens) - j - 1))
      mask = oh if mask is None else mask & oh
    rest = [d for d in range(x.ndim) if d not in tpos]
    xt = x.permute(rest + tpos)                                      # (*rest, s_1..s_k)
    xt = xt.reshape(*[1] * len(B), *xt.shape)                        # (*1s, *rest, s..)
    mask = mask.reshape(*B, *[1] * len(rest), *mask.shape[len(B):])  # (*B, *1s, s..)
    red = tuple(range(len(B) + len(rest), len(B) + len(rest) + len(tens)))
    out = mask.where(xt, 0).sum(red, dtype=sum_acc_dtype(x.dtype) if x.dtype != dtypes.bool else dtypes.int32).cast(x.dtype)  # (*B, *rest)
    # torch's rule (not numpy's): an int index is a basic one, applied first; the tensor indices stay in place when they
    # are adjacent among what is left, else their broadcast dims go first
    adjacent = tpos == list(range(tpos[0], tpos[0] + len(tpos)))
    if adjacent and tpos[0] != 0:
      nb, first = len(B), tpos[0]
      order = list(range(nb, nb + first)) + list(range(nb)) + list(range(nb + first, out.ndim))
      out = out.permute(order)
    return out

  def __setitem__(self, idx, v):
    """Lazy: the whole new value is built with where() and assigned in place."""
    Tensor = tensor_type()
    idx = idx if isinstance(idx, tuple) else (idx,)
    if not isinstance(v, Tensor):
      if not isinstance(v, (bool, int, float)): v = Tensor(v, device=self.device, dtype=self.dtype)
      else: v = Tensor(v, device=self.device, dtype=self.dtype)
    if v.device != self.device: v = v.to(self.device)
    if any(_is_tensor_index(i) for i in idx):
      pos = Tensor._index_range(self.numel(), self.device).reshape(self.shape)
      sel = pos[idx]
      try: broadcast_shape(v.shape, sel.shape)
      except ValueError: raise ValueError(f"can't assign a value of shape {v.shape} to an indexed region of shape {sel.shape}") from None
      if len(broadcast_shape(v.shape, sel.shape)) != len(sel.shape) or broadcast_shape(v.shape, sel.shape) != sel.shape:
        raise ValueError(f"can't assign a value of shape {v.shape} to an indexed region of shape {sel.shape}")
      m = sel.numel()
      vb, sf = v.cast(self.dtype)._expand_to(sel.shape).reshape(m, 1), sel.reshape(m, 1)
      oh = sf == Tensor._index_range(self.numel(), self.device).reshape(1, -1)                 # (m, numel)
      # last write wins for repeated indices, like numpy: keep only the last hit per target
      later = (oh.cast(dtypes.int32).flip(0).cumsum(0).flip(0) - oh.cast(dtypes.int32)) > 0 if m > 1 else None
      if later is not None: oh = oh & later.logical_not()
      hit = oh.any(0).reshape(self.shape)
      acc = sum_acc_dtype(self.dtype) if self.dtype != dtypes.bool else dtypes.int32
      val = oh.where(vb, 0).sum(0, dtype=acc).cast(self.dtype).reshape(self.shape)
      new = hit.where(val, self)
    else:
      plan = self._basic_plan(idx)
      region = self._apply_basic(plan)
      try: out = broadcast_shape(v.shape, region.shape)
      except ValueError: out = None
      if out != tuple(region.shape): raise ValueError(f"can't assign a value of shape {v.shape} to a region of shape {region.shape}")
      vr = v.cast(self.dtype)._expand_to(region.shape)
      hit = self._unapply_basic(plan, Tensor.ones(*region.shape, dtype=dtypes.bool, device=self.device), fill=False)
      val = self._unapply_basic(plan, vr)
      new = hit.where(val, self)
    self.assign(new.cast(self.dtype))

  # ---- gather / scatter
  def _onehot_dim(self, index, dim: int, what: str):
    """For gather/scatter: checks, and mask[..., s] = (index == s) shaped (*index.shape, size of `dim` in self)."""
    Tensor = tensor_type()
    if not dtypes.is_int(index.dtype): raise DTypeError(f"{what} index must be an integer tensor, got {index.dtype}")
    if index.device != self.device: raise ArgumentError(f"{what} index is on {index.device}, the tensor on {self.device}")
    if index.ndim != self.ndim: raise ShapeError(f"{what} index must have the same number of dims as the input: {index.shape} vs {self.shape}")
    d = self._resolve_dim(dim)
    for i, (a, b) in enumerate(zip(index.shape, self.shape)):
      if i != d and a > b: raise ShapeError(f"{what} index shape {index.shape} exceeds input shape {self.shape} at dim {i}")
    _check_bounds(index, self.shape[d], d)
    s = self.shape[d]
    return d, index.unsqueeze(-1) == Tensor._index_range(s, self.device).reshape(*[1] * index.ndim, s)
  def gather(self, dim: int, index):
    """out[i][j] = self[index[i][j]][j] (for dim 0)."""
    d, oh = self._onehot_dim(index, dim, "gather")
    x = self.shrink(tuple((0, s) if i == d else (0, index.shape[i]) for i, s in enumerate(self.shape)))
    x = x.unsqueeze(-1).transpose(d, -1)   # (..., 1 at d, ..., s at the end)
    return oh.where(x, 0).sum(-1, dtype=sum_acc_dtype(self.dtype) if self.dtype != dtypes.bool else dtypes.int32).cast(self.dtype)
  def _scatter_parts(self, dim, index, src, what):
    Tensor = tensor_type()
    d, oh = self._onehot_dim(index, dim, what)
    if not isinstance(src, Tensor): src = Tensor.full(index.shape, src, dtype=self.dtype, device=self.device)
    if src.dtype != self.dtype: raise DTypeError(f"{what}: src is {src.dtype} but the tensor is {self.dtype} (torch insists they match)")
    if src.ndim != self.ndim: raise ShapeError(f"{what} src must have the tensor's number of dims: {src.shape} vs {self.shape}")
    for i, (a, b) in enumerate(zip(index.shape, src.shape)):
      if a > b: raise ShapeError(f"{what} index shape {index.shape} exceeds src shape {src.shape} at dim {i}")
    src = src.shrink(tuple((0, s) for s in index.shape)).cast(self.dtype)
    # oh: (*index.shape, S); move the index's dim d out and S into d, padding the other dims up to self's shape
    pad = tuple((0, 0) if i == d else (0, s - index.shape[i]) for i, s in enumerate(self.shape)) + ((0, 0),)
    oh = oh.pad(pad, value=False) if any(p != (0, 0) for p in pad) else oh
    src = src.unsqueeze(-1).pad(pad)
    return d, oh, src
  def _scatter_move(self, r, d):
    """(*shape with index-dim at d, S last) reduced over d with keepdim -> self's shape."""
    return r.transpose(d, -1).squeeze(-1)
  def scatter(self, dim: int, index, src, reduce: str | None = None):
    """out[index[i][j]][j] = src[i][j] (for dim 0); reduce 'add' or 'multiply' combines with the existing values instead."""
    Tensor = tensor_type()
    if reduce not in (None, "add", "multiply"): raise ArgumentError(f"scatter reduce must be None, 'add' or 'multiply', not {reduce!r}")
    if reduce is not None and isinstance(src, Tensor): raise TypeError("scatter's reduce takes a scalar src; for a tensor src use scatter_reduce")
    if reduce == "add": return self.scatter_reduce(dim, index, src, "sum")
    if reduce == "multiply": return self.scatter_reduce(dim, index, src, "prod")
    d, oh, src = self._scatter_parts(dim, index, src, "scatter")
    # several sources for one target: the last one along dim wins (torch on CPU, numpy's assignment)
    n = oh.shape[d]
    pos = Tensor._index_range(n, self.device).reshape(*[n if i == d else 1 for i in range(oh.ndim)])
    last = oh.where(pos, -1).max(d, keepdim=True)
    pick = oh & (pos == last)
    hit = self._scatter_move(oh.any(d, keepdim=True), d)
    acc = sum_acc_dtype(self.dtype) if self.dtype != dtypes.bool else dtypes.int32
    val = self._scatter_move(pick.where(src, 0).sum(d, keepdim=True, dtype=acc), d)
    return hit.where(val.cast(self.dtype), self)
  def scatter_reduce(self, dim: int, index, src, reduce: str, include_self: bool = True):
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
      raise ArgumentError(f"scatter_reduce reduce must be sum, prod, mean, amax or amin, not {reduce!r}")
    d, oh, src = self._scatter_parts(dim, index, src, "scatter_reduce")
    mv = lambda r: self._scatter_move(r, d)
    hit = mv(oh.any(d, keepdim=True))
    cnt = mv(oh.cast(dtypes.int32).sum(d, keepdim=True))
    base = self if include_self else hit.where(self.zeros_like(), self)
    if reduce in ("sum", "mean"):
      s = mv(oh.where(src, 0).sum(d, keepdim=True, dtype=sum_acc_dtype(self.dtype) if self.dtype != dtypes.bool else dtypes.int32))
      if reduce == "sum": return (base.cast(s.dtype) + s).cast(self.dtype)
      n = cnt + (1 if include_self else 0)
      tot = base.cast(s.dtype) + s
      r = (tot / n.maximum(1)) if dtypes.is_float(self.dtype) else tot.div(n.maximum(1), rounding_mode="floor")
      return hit.where(r.cast(self.dtype), self)
    if reduce == "prod":
      p = mv(oh.where(src, 1).prod(d, keepdim=True, dtype=self.dtype if self.dtype != dtypes.bool else dtypes.int32)).cast(self.dtype)
      return hit.where(base * p if include_self else p, self)
    lo, hi = dtypes.min(self.dtype), dtypes.max(self.dtype)
    if reduce == "amax":
      m = mv(oh.where(src, lo).max(d, keepdim=True))
      return hit.where(self.maximum(m) if include_self else m, self)
    m = mv(oh.where(src, hi).min(d, keepdim=True))
    return hit.where(self.minimum(m) if include_self else m, self)

  def one_hot(self, num_classes: int | None = None) -> Tensor:
    """int32 one-hot of the last dim's new axis. num_classes=None reads the max (a realize); a negative count is an
    error, as in tinygrad and jax (torch's -1 means "infer": pass None)."""
    Tensor = tensor_type()
    if not dtypes.is_int(self.dtype): raise DTypeError(f"one_hot needs an integer tensor, got {self.dtype}")
    if num_classes is not None and num_classes < 0:
      raise ArgumentError(f"one_hot num_classes must be non-negative, got {num_classes} (None infers it)")
    if num_classes is None: num_classes = int(self.max().item()) + 1 if self.numel() else 0
    return (self.unsqueeze(-1) == Tensor._index_range(num_classes, self.device).reshape(*[1] * self.ndim, num_classes)).where(1, 0)

  def masked_fill(self, mask, value):
    Tensor = tensor_type()
    if isinstance(mask, Tensor) and mask.dtype != dtypes.bool: raise TypeError(f"masked_fill mask must be bool, got {mask.dtype}")
    return mask.where(value, self).cast(self.dtype) if isinstance(value, Tensor) else mask.where(value, self)
  def masked_select(self, mask: Tensor, size: int | None = None, fill_value: float = 0) -> Tensor:
    """The elements where mask is True, as a 1-d tensor. Without `size` its length depends on the data, so the mask is
    realized; with `size` it stays lazy (jittable): the first `size` picks, then `fill_value`."""
    Tensor = tensor_type()
    import numpy as np
    if mask.dtype != dtypes.bool: raise DTypeError(f"masked_select mask must be bool, got {mask.dtype}")
    shape = broadcast_shape(self.shape, mask.shape)
    if size is not None:
      m = mask._expand_to(shape).flatten()
      return self._expand_to(shape).flatten()._compact(m, size, fill_value)
    pos = np.nonzero(mask._expand_to(shape).numpy().reshape(-1))[0].astype(np.int32)
    return self._expand_to(shape).flatten()[Tensor(pos, device=self.device)] if len(pos) else Tensor.empty(0, dtype=self.dtype, device=self.device)
  def nonzero(self, size: int | None = None, fill_value: float = 0) -> Tensor:
    """(n, ndim) int32 positions of the non-zero elements. Without `size` n depends on the data (a realize); with `size`
    it stays lazy: the first `size` positions, then rows of `fill_value`."""
    Tensor = tensor_type()
    import numpy as np
    if size is None: return Tensor(np.argwhere(self.numpy()).astype(np.int32), device=self.device)
    if self.ndim == 0: return Tensor.zeros(size, 0, dtype=dtypes.int32, device=self.device)
    coords = Tensor.stack(*[Tensor._index_range(s, self.device).reshape(*[s if j == i else 1 for j in range(self.ndim)])._expand_to(self.shape)
                            .flatten() for i, s in enumerate(self.shape)], dim=-1)     # (numel, ndim)
    return coords._compact(self.flatten() != 0, size, fill_value)
  def _compact(self, keep: Tensor, size: int, fill_value: float) -> Tensor:
    """Rows of self (dim 0) where `keep` is True, moved to the front, cut or padded with fill_value to `size` rows;
    lazy: row i lands at slot (number of kept rows before it)."""
    Tensor = tensor_type()
    if not isinstance(size, int) or size < 0: raise ArgumentError(f"size must be a non-negative int, got {size!r}")
    n = keep.shape[0]
    if n == 0: return Tensor.full((size, *self.shape[1:]), fill_value, dtype=self.dtype, device=self.device)
    slot = keep.cast(dtypes.int32).cumsum(0) - 1                                   # (n,)
    hit = keep.reshape(1, n) & (slot.reshape(1, n) == Tensor._index_range(size, self.device).reshape(size, 1))   # (size, n)
    hit = hit.reshape(size, n, *[1] * (self.ndim - 1))
    acc = sum_acc_dtype(self.dtype) if self.dtype != dtypes.bool else dtypes.int32
    vals = hit.where(self.reshape(1, *self.shape), 0).sum(1, dtype=acc).cast(self.dtype)
    return hit.any(1).where(vals, Tensor(fill_value, device=self.device).cast(self.dtype))

  # ---- cumulative scans: windows over a padded copy, blocked so the work is O(n * 256), not O(n^2)
  def _cum(self, axis: int, op: str):
    d = self._resolve_dim(axis)
    if self.ndim == 0: return self
    x = self.transpose(d, -1) if d != self.ndim - 1 else self
    r = x._scan_last(op)
    return r.transpose(d, -1) if d != self.ndim - 1 else r
  def _scan_ident(self, op: str): return {"sum": 0, "prod": 1, "lse": -math.inf}.get(op, dtypes.min(self.dtype))
  def _scan_last(self, op: str, block: int = 256):
    n = self.shape[-1]
    if n == 0: return self
    ident = self._scan_ident(op)
    red = {"sum": lambda t: t.sum(-1, dtype=t.dtype), "prod": lambda t: t.prod(-1, dtype=t.dtype), "max": lambda t: t.max(-1),
           "lse": lambda t: t.logsumexp(-1)}[op]
    pre = ((0, 0),) * (self.ndim - 1)
    if n <= block:
      return red(self.pad(pre + ((n - 1, 1),), value=ident)._pool_last(n))   # window i covers x[i-n+1 .. i]
    nb = math.ceil(n / block)
    x = self.pad(pre + ((0, nb * block - n),), value=ident).reshape(*self.shape[:-1], nb, block)
    inner = x._scan_last(op, block)                                        # (..., nb, block)
    tot = inner[..., -1]                                                   # (..., nb)
    excl = tot._scan_last(op, block).pad(pre + ((1, 0),), value=ident)[..., :nb]   # exclusive scan of block totals
    comb = {"sum": lambda a, b: a + b, "prod": lambda a, b: a * b, "max": lambda a, b: a.maximum(b), "lse": lambda a, b: a.logaddexp(b)}[op]
    out = comb(inner, excl.unsqueeze(-1)).cast(self.dtype)
    return out.reshape(*self.shape[:-1], nb * block)[..., :n]
  def cumsum(self, axis: int = 0): return self.cast(sum_acc_dtype(self.dtype))._cum(axis, "sum")
  def cumprod(self, axis: int = 0): return self.cast(sum_acc_dtype(self.dtype))._cum(axis, "prod")
  def cummax(self, axis: int = 0):
    """(values, indices), like torch: the running max along `axis` and where it was last attained (int32)."""
    values = self._cum(axis, "max") if self.dtype != dtypes.bool else self.cast(dtypes.uint8)._cum(axis, "max").cast(dtypes.bool)
    return values, self._cum_arg(values, axis)
  def cummin(self, axis: int = 0):
    """(values, indices), like torch: the running min along `axis` and where it was last attained (int32)."""
    if self.dtype == dtypes.bool: values = self.cast(dtypes.uint8).cummin(axis)[0].cast(dtypes.bool)
    elif dtypes.is_float(self.dtype): values = -((-self).cummax(axis)[0])
    else: values = ~((~self).cummax(axis)[0])   # ~x reverses the order of ints without overflow (-int.min wraps)
    return values, self._cum_arg(values, axis)
  def _cum_arg(self, values: Tensor, axis: int) -> Tensor:
    # the running extreme changes exactly where x equals it, so the last such position up to i is a running max of
    # "i where x == running value, else 0"
    Tensor = tensor_type()
    if self.ndim == 0: return Tensor.zeros((), dtype=dtypes.int32, device=self.device)
    d = self._resolve_dim(axis)
    pos = Tensor._index_range(self.shape[d], self.device).reshape(*[self.shape[d] if i == d else 1 for i in range(self.ndim)])
    return (self == values).where(pos, 0)._cum(d, "max")

  # ---- arg reductions
  def argmax(self, axis=None, keepdim=False):
    """Index of the first maximum: mark the maxima, weight them by n - i, and take the max of that."""
    Tensor = tensor_type()
    if axis is None:
      if self.numel() == 0: raise ValueError(f"argmax of an empty tensor (shape {self.shape})")
      r = self.flatten().argmax(0)
      return r.reshape((1,) * self.ndim) if keepdim else r
    d = self._resolve_dim(axis)
    n = self.shape[d]
    if n == 0: raise ValueError(f"argmax over an empty dimension {d} of shape {self.shape}")
    x = self if self.dtype != dtypes.bool else self.cast(dtypes.uint8)
    m = _is_extreme(x, x.max(d, keepdim=True))
    w = Tensor.arange(n, 0, -1, device=self.device).reshape(n, *[1] * (self.ndim - d - 1))
    return (n - m.where(w, 0).max(d, keepdim=keepdim)).cast(dtypes.int32)
  def argmin(self, axis=None, keepdim=False):
    Tensor = tensor_type()
    if axis is None:
      if self.numel() == 0: raise ValueError(f"argmin of an empty tensor (shape {self.shape})")
      r = self.flatten().argmin(0)
      return r.reshape((1,) * self.ndim) if keepdim else r
    d = self._resolve_dim(axis)
    n = self.shape[d]
    if n == 0: raise ValueError(f"argmin over an empty dimension {d} of shape {self.shape}")
    m = _is_extreme(self, self.min(d, keepdim=True))
    w = Tensor.arange(n, 0, -1, device=self.device).reshape(n, *[1] * (self.ndim - d - 1))
    return (n - m.where(w, 0).max(d, keepdim=keepdim)).cast(dtypes.int32)

  # ---- sorting: the rank of each element (stable: ties by position) by pairwise comparison, then a one-hot permutation
  def _ranks_last(self, descending: bool):
    Tensor = tensor_type()
    n = self.shape[-1]
    a, b = self.unsqueeze(-1), self.unsqueeze(-2)           # a[i] vs b[j]
    before = (b > a) if descending else (b < a)
    same = b == a
    if dtypes.is_float(self.dtype):
      # NaN sorts as the largest value, like torch: last ascending, first descending, NaNs among themselves by position
      na, nb = a != a, b != b
      before = before | ((nb & na.logical_not()) if descending else (na & nb.logical_not()))
      same = same | (na & nb)
    i = Tensor._index_range(n, self.device)
    tie = same & (i.reshape(1, n) < i.reshape(n, 1))   # j < i
    return (before | tie).cast(dtypes.int32).sum(-1)      # (..., n): position of element i in the sorted order
  def sort(self, dim: int = -1, descending: bool = False):
    """(values, indices) sorted along dim; stable. O(n^2) compares per row, all in fused kernels."""
    Tensor = tensor_type()
    d = self._resolve_dim(dim) if self.ndim else 0
    if self.ndim == 0: return self, Tensor(0, device=self.device)
    x = self.transpose(d, -1) if d != self.ndim - 1 else self
    n = x.shape[-1]
    if n == 0: return self, Tensor.zeros(*self.shape, dtype=dtypes.int32, device=self.device)
    rank = x._ranks_last(descending)
    oh = rank.unsqueeze(-2) == Tensor._index_range(n, self.device).reshape(n, 1)   # oh[k, i]: element i goes to slot k
    vals = oh.where(x.unsqueeze(-2), 0).sum(-1, dtype=sum_acc_dtype(x.dtype) if x.dtype != dtypes.bool else dtypes.int32).cast(x.dtype)
    idx = oh.where(Tensor._index_range(n, self.device), 0).sum(-1)
    if d != self.ndim - 1: vals, idx = vals.transpose(d, -1), idx.transpose(d, -1)
    return vals, idx
  def argsort(self, dim: int = -1, descending: bool = False): return self.sort(dim, descending)[1]
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True):
    d = self._resolve_dim(dim)
    if not 0 <= k <= self.shape[d]: raise ValueError(f"topk k={k} is out of range for dimension {d} of size {self.shape[d]}")
    v, i = self.sort(d, descending=largest)
    return v._slice_dim(d, 0, k), i._slice_dim(d, 0, k)

  # ---- scans composed from the ones above
  def logcumsumexp(self, axis: int = 0):
    # a scan whose windows each take their own logsumexp (shifted by their own max): one global shift would underflow
    # exp(x - max) to 0 for entries far below a later maximum ([0, 100] gave -inf, not 0)
    return self._float()._cum(axis, "lse")
