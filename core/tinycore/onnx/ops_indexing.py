"""Indexing ops: Gather/GatherElements/GatherND, Scatter*/ScatterND, OneHot, NonZero, Compress, TopK.

Negative indices count from the end (ONNX allows them everywhere here); they are normalized before the Tensor ops,
which take only non-negative positions."""
from __future__ import annotations
import math
import numpy as np
from tinycore.dtype import dtypes
from tinycore.onnx.registry import op, UnsupportedOpError, is_static

def _norm_index(ctx, idx, n):
  if not isinstance(n, int):   # a dynamic axis: negative positions count back from a symbolic size
    from tinycore.onnx.dynamic import sym_scalar
    t = ctx.tensor(idx).cast(dtypes.int32)
    return (t < 0).where(t + sym_scalar(n, ctx.device, dtypes.int32), t)
  if is_static(idx):
    a = np.asarray(idx).astype(np.int64)
    if a.size and (a.min() < -n or a.max() >= n): raise IndexError(f"index out of range [{-n}, {n}): {a.min()}..{a.max()}")
    return ctx.tensor(np.where(a < 0, a + n, a).astype(np.int32))
  t = ctx.tensor(idx)
  return (t < 0).where(t + n, t).cast(dtypes.int32)

@op("Gather")
def gather(ctx, ins, attrs):
  x, idx = ctx.tensor(ins[0]), ins[1]
  axis = attrs.get("axis", 0) % x.ndim
  n = x.shape[axis]
  if is_static(idx) and np.asarray(idx).ndim == 0:   # one position: a slice, no index math
    i = int(idx) + (n if int(idx) < 0 else 0)
    if isinstance(n, int) and not 0 <= i < n: raise IndexError(f"Gather index {int(idx)} out of range for axis {axis} of size {n}")
    # a shrink, not x[..., i]: indexing compares sizes as ints, and other dims may be symbolic (dynamic axes)
    keep = tuple((i, i + 1) if k == axis else (0, s) for k, s in enumerate(x.shape))
    return x.shrink(keep).reshape(tuple(s for k, s in enumerate(x.shape) if k != axis))
  t = _norm_index(ctx, idx, n)
  if not all(isinstance(d, int) for d in list(x.shape) + list(t.shape)): return _onehot_gather(x, t, axis)
  return x[(slice(None),) * axis + (t,)]

def _onehot_gather(x, t, axis):
  """Gather where a size is symbolic (dynamic axes): positions matched against 0..n-1 and summed over n (the frontend's
  tensor indexing needs int sizes). n times the work of a gather; used only for symbolic shapes."""
  from tinycore.onnx.dynamic import sym_arange
  pre, n, post = tuple(x.shape[:axis]), x.shape[axis], tuple(x.shape[axis + 1:])
  ishape = tuple(t.shape)
  xr = x.reshape(pre + (1,) * len(ishape) + (n,) + post)
  hit = t.reshape(ishape + (1,)) == sym_arange(n, x.device).cast(t.dtype).reshape((1,) * len(ishape) + (n,))
  hit = hit.reshape((1,) * len(pre) + ishape + (n,) + (1,) * len(post))
  out = hit.where(xr, 0).sum(axis=len(pre) + len(ishape))
  return out.cast(x.dtype) if out.dtype != x.dtype else out

@op("GatherElements")
def gather_elements(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = attrs.get("axis", 0) % x.ndim
  return x.gather(axis, _norm_index(ctx, ins[1], x.shape[axis]))

def _nd_flat(ctx, data_shape, indices, b):
  """GatherND/ScatterND indices (..., k) over data dims b..b+k as one flat position per row: (B, M) int32."""
  idx = ctx.tensor(indices).cast(dtypes.int32)
  k = idx.shape[-1]
  dims = data_shape[b:b + k]
  strides = [math.prod(dims[j + 1:]) for j in range(k)]
  flat = None
  for j in range(k):
    col = idx[..., j]
    col = (col < 0).where(col + dims[j], col)
    flat = col * strides[j] if flat is None else flat + col * strides[j]
  bsz = math.prod(data_shape[:b])
  return flat.reshape(bsz, -1), k

@op("GatherND")
def gather_nd(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  b = attrs.get("batch_dims", 0)
  flat, k = _nd_flat(ctx, x.shape, ins[1], b)
  rest = x.shape[b + k:]
  data = x.reshape(flat.shape[0], math.prod(x.shape[b:b + k]), *rest)
  m = flat.shape[1]
  index = flat.reshape(flat.shape[0], m, *[1] * len(rest)).expand(flat.shape[0], m, *rest)
  out = data.gather(1, index)
  idx_shape = tuple(ctx.tensor(ins[1]).shape)
  return out.reshape(*idx_shape[:-1], *rest)

_REDUCE = {"none": None, "add": "sum", "mul": "prod", "max": "amax", "min": "amin"}

def _scatter(x, axis, index, updates, reduction):
  if reduction not in _REDUCE: raise UnsupportedOpError(f"scatter reduction {reduction!r}")
  if _REDUCE[reduction] is None: return x.scatter(axis, index, updates.cast(x.dtype))
  return x.scatter_reduce(axis, index, updates.cast(x.dtype), _REDUCE[reduction], include_self=True)

@op("ScatterElements", "Scatter")
def scatter_elements(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = attrs.get("axis", 0) % x.ndim
  return _scatter(x, axis, _norm_index(ctx, ins[1], x.shape[axis]), ctx.tensor(ins[2]), attrs.get("reduction", "none"))

@op("ScatterND")
def scatter_nd(ctx, ins, attrs):
  x, upd = ctx.tensor(ins[0]), ctx.tensor(ins[2])
  flat, k = _nd_flat(ctx, x.shape, ins[1], 0)
  rest = x.shape[k:]
  data = x.reshape(math.prod(x.shape[:k]), *rest)
  m = flat.shape[1]
  index = flat.reshape(m, *[1] * len(rest)).expand(m, *rest)
  out = _scatter(data, 0, index, upd.reshape(m, *rest), attrs.get("reduction", "none"))
  return out.reshape(x.shape)

@op("OneHot")
def one_hot(ctx, ins, attrs):
  from tinycore.tensor import Tensor
  idx = ctx.tensor(ins[0])
  depth = int(ctx.scalar(ins[1]))
  values = ctx.tensor(ins[2])
  axis = attrs.get("axis", -1) % (idx.ndim + 1)
  if dtypes.is_float(idx.dtype): idx = idx.trunc()
  idx = idx.cast(dtypes.int64)
  idx = (idx < 0).where(idx + depth, idx).unsqueeze(axis)
  ar = Tensor.arange(depth, device=idx.device).reshape(*[depth if d == axis else 1 for d in range(idx.ndim)])
  return (idx == ar).where(values[1], values[0])

@op("NonZero")
def nonzero(ctx, ins, attrs):
  # the output's length depends on the data: this realizes the input
  a = ctx.array(ins[0])
  return np.array(np.nonzero(a), dtype=np.int64).reshape(a.ndim, -1)

@op("Compress")
def compress(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  cond = ctx.array(ins[1]).astype(bool).reshape(-1)
  if "axis" not in attrs: x, axis = x.flatten(), 0
  else: axis = attrs["axis"] % x.ndim
  pos = np.nonzero(cond[:x.shape[axis]])[0].astype(np.int32)
  if len(pos) == 0: return x.shrink(tuple((0, 0) if d == axis else (0, s) for d, s in enumerate(x.shape)))
  return x[(slice(None),) * axis + (ctx.tensor(pos),)]

@op("TopK")
def topk(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  k = int(ctx.scalar(ins[1])) if ctx.opset >= 10 else attrs["k"]
  axis = attrs.get("axis", -1) % x.ndim
  v, i = x.topk(k, axis, largest=bool(attrs.get("largest", 1)), sorted_=True)
  return v, i.cast(dtypes.int64)
