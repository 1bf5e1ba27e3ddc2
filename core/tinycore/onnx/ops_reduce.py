"""Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare and ArgMax/ArgMin."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.onnx.registry import op

def _reduce_axes(ctx, ins, attrs, name, ndim):
  # axes moved from an attribute to an input at opset 13 (ReduceSum) / 18 (the rest)
  if "axes" in attrs: axes = attrs["axes"]
  elif len(ins) > 1 and ins[1] is not None: axes = ctx.ints(ins[1])
  else: axes = []
  if not axes: return None if attrs.get("noop_with_empty_axes", 0) else tuple(range(ndim))
  return tuple(a % ndim for a in axes)

def _reduction(fn):
  def handler(ctx, ins, attrs):
    x = ctx.tensor(ins[0])
    axes = _reduce_axes(ctx, ins, attrs, "", x.ndim)
    if axes is None: return x
    keep = bool(attrs.get("keepdims", 1))
    return fn(x, axes, keep)
  return handler

def _extreme(largest: bool):
  def fn(x, axes, keep):
    if x.dtype == dtypes.bool: return x.any(axes, keepdim=keep) if largest else x.all(axes, keepdim=keep)
    if any(x.shape[a] == 0 for a in axes):   # an empty set reduces to the identity: -inf for max, +inf for min
      from tinycore.tensor import Tensor
      shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape)) if keep else tuple(s for i, s in enumerate(x.shape) if i not in axes)
      ident = (dtypes.min if largest else dtypes.max)(x.dtype)
      return Tensor.full(shape, ident, dtype=x.dtype, device=x.device)
    return x.max(axes, keepdim=keep) if largest else x.min(axes, keepdim=keep)
  return fn

def _sum(x, axes, keep): return x.sum(axes, keepdim=keep).cast(x.dtype) if x.ndim else x

op("ReduceSum")(_reduction(_sum))
op("ReduceMean")(_reduction(lambda x, a, k: x.mean(a, keepdim=k).cast(x.dtype)))
op("ReduceMax")(_reduction(_extreme(True)))
op("ReduceMin")(_reduction(_extreme(False)))
op("ReduceProd")(_reduction(lambda x, a, k: x.prod(a, keepdim=k).cast(x.dtype)))
op("ReduceL1")(_reduction(lambda x, a, k: x.abs().sum(a, keepdim=k).cast(x.dtype)))
op("ReduceL2")(_reduction(lambda x, a, k: (x * x).sum(a, keepdim=k).sqrt().cast(x.dtype)))
op("ReduceSumSquare")(_reduction(lambda x, a, k: (x * x).sum(a, keepdim=k).cast(x.dtype)))
op("ReduceLogSum")(_reduction(lambda x, a, k: x.sum(a, keepdim=k).log()))
def _logsumexp(x, axes, keep):
  if any(x.shape[a] == 0 for a in axes):   # log(sum over nothing) = log(0) = -inf (x.logsumexp's max has no identity)
    return _sum(x, axes, keep).log()
  return x.logsumexp(axes, keepdim=keep)

op("ReduceLogSumExp")(_reduction(_logsumexp))

def _arg(largest: bool):
  def handler(ctx, ins, attrs):
    x = ctx.tensor(ins[0])
    axis, keep = attrs.get("axis", 0) % x.ndim, bool(attrs.get("keepdims", 1))
    if attrs.get("select_last_index", 0):   # search the flipped axis and map the index back
      x = x.flip(axis)
      idx = (x.argmax(axis, keepdim=keep) if largest else x.argmin(axis, keepdim=keep))
      return (x.shape[axis] - 1 - idx).cast(dtypes.int64)
    return (x.argmax(axis, keepdim=keep) if largest else x.argmin(axis, keepdim=keep)).cast(dtypes.int64)
  return handler

op("ArgMax")(_arg(True))
op("ArgMin")(_arg(False))
