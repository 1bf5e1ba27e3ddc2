"""Sequence values (ONNX `seq(tensor)`) as Python lists of values: SequenceEmpty/Construct/At/Insert/Erase/Length,
SplitToSequence and ConcatFromSequence. Positions are static (read on the host); negative ones count from the end.
A handler returns a sequence inside a 1-tuple: a bare list would read as one value per output."""
from __future__ import annotations
import numpy as np
from tinycore.onnx.registry import op

def _seq(x, what: str) -> list:
  if not isinstance(x, list): raise TypeError(f"{what} needs a sequence input, got {type(x).__name__}")
  return x

def _position(ctx, pos, n: int, what: str, allow_end: bool = False) -> int:
  p = int(ctx.scalar(pos))
  lo, hi = -n, (n if allow_end else n - 1)
  if not lo <= p <= hi: raise IndexError(f"{what} position {p} out of range [{lo}, {hi}] for a sequence of {n}")
  return p + n if p < 0 else p

@op("SequenceEmpty", since=11)
def sequence_empty(ctx, ins, attrs): return ([],)

@op("SequenceConstruct", since=11)
def sequence_construct(ctx, ins, attrs): return ([x for x in ins if x is not None],)

@op("SequenceAt", since=11)
def sequence_at(ctx, ins, attrs):
  s = _seq(ins[0], "SequenceAt")
  return s[_position(ctx, ins[1], len(s), "SequenceAt")]

@op("SequenceInsert", since=11)
def sequence_insert(ctx, ins, attrs):
  s = list(_seq(ins[0], "SequenceInsert"))
  p = _position(ctx, ins[2], len(s), "SequenceInsert", allow_end=True) if len(ins) > 2 and ins[2] is not None else len(s)
  s.insert(p, ins[1])
  return (s,)

@op("SequenceErase", since=11)
def sequence_erase(ctx, ins, attrs):
  s = list(_seq(ins[0], "SequenceErase"))
  if not s: raise IndexError("SequenceErase on an empty sequence")
  p = _position(ctx, ins[1], len(s), "SequenceErase") if len(ins) > 1 and ins[1] is not None else len(s) - 1
  del s[p]
  return (s,)

@op("SequenceLength", since=11)
def sequence_length(ctx, ins, attrs): return np.array(len(_seq(ins[0], "SequenceLength")), dtype=np.int64)

@op("SplitToSequence", since=11)
def split_to_sequence(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = attrs.get("axis", 0) % x.ndim
  n = x.shape[axis]
  split = ctx.ints(ins[1]) if len(ins) > 1 and ins[1] is not None else None
  scalar_split = split is not None and np.asarray(ctx.array(ins[1])).ndim == 0
  if split is None: sizes = [1] * n
  elif scalar_split:
    if split[0] < 1: raise ValueError(f"SplitToSequence chunk size must be positive, got {split[0]}")
    sizes = [min(split[0], n - i) for i in range(0, n, split[0])]
  else: sizes = split
  if sum(sizes) != n: raise ValueError(f"SplitToSequence sizes {sizes} don't add up to {n} along axis {axis}")
  out, start = [], 0
  for s in sizes:
    part = x.shrink(tuple((start, start + s) if a == axis else (0, d) for a, d in enumerate(x.shape)))
    if split is None and not attrs.get("keepdims", 1): part = part.squeeze(axis)
    out.append(part)
    start += s
  return (out,)

@op("ConcatFromSequence", since=11)
def concat_from_sequence(ctx, ins, attrs):
  s = [ctx.tensor(x) for x in _seq(ins[0], "ConcatFromSequence")]
  if not s: raise ValueError("ConcatFromSequence of an empty sequence")
  axis = attrs["axis"]
  if attrs.get("new_axis", 0):
    axis %= s[0].ndim + 1
    s = [t.unsqueeze(axis) for t in s]
  return s[0].cat(*s[1:], dim=axis) if len(s) > 1 else s[0]
