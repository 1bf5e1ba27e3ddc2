"""Shape arithmetic on symbolic sizes: the ops exporters put between `Shape` and `Reshape`/`Expand`/`Range` (Gather,
Unsqueeze, Concat, Add, ...) evaluated on the host over numpy object arrays of ints and symbolic UOps.

`fold(op_type, ins, attrs)` returns the outputs, or None when the op isn't shape arithmetic it can do exactly (a float
Cast, a comparison it can't decide): the op's handler then gets the values (ctx.tensor makes a Tensor of them)."""
from __future__ import annotations
from typing import Any, Callable
import numpy as np
from tinycore.uop import UOp
from tinycore.onnx.dynamic import is_sym, norm_sint, sym_array

def _ints(x) -> list: return [norm_sint(v) for v in np.asarray(x, dtype=object).reshape(-1)]

def _axes(ins, attrs, i=1):
  if "axes" in attrs: return list(attrs["axes"])
  if len(ins) > i and ins[i] is not None: return [int(v) for v in np.asarray(ins[i]).reshape(-1)]
  return None

def _obj(x) -> np.ndarray: return np.asarray(x, dtype=object) if not is_sym(x) else x

def _elementwise(fn: Callable) -> Callable:
  def run(ins, attrs):
    a, b = _obj(ins[0]), _obj(ins[1])
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), dtype=object)
    for idx, (x, y) in zip(np.ndindex(out.shape), np.broadcast(a, b)):
      r = fn(norm_sint(x), norm_sint(y))
      if r is None: return None
      out[idx] = r
    return sym_array(out)
  return run

def _div(x, y):
  if isinstance(y, UOp) or y == 0: return None
  if isinstance(x, int): return int(np.trunc(x / y)) if (x < 0) != (y < 0) else x // y   # ONNX integer Div truncates
  return x // y if y > 0 and x.vmin >= 0 else None

def _compare(kind: str):
  def cmp(x, y):
    if isinstance(x, int) and isinstance(y, int): return {"eq": x == y, "lt": x < y, "gt": x > y}[kind]
    d = norm_sint(x - y) if isinstance(x, UOp) else norm_sint(-(y - x))   # x - y with a symbolic operand
    if isinstance(d, int): return {"eq": d == 0, "lt": d < 0, "gt": d > 0}[kind]
    lo, hi = int(d.vmin), int(d.vmax)
    if kind == "eq": return False if lo > 0 or hi < 0 else None
    if kind == "lt": return True if hi < 0 else False if lo >= 0 else None
    return True if lo > 0 else False if hi <= 0 else None
  return cmp

def _minmax(pick):
  def mm(x, y):
    if isinstance(x, int) and isinstance(y, int): return pick(x, y)
    d = norm_sint(x - y) if isinstance(x, UOp) else norm_sint(-(y - x))
    if isinstance(d, int): return x if (d >= 0) == (pick is max) else y
    if d.vmin >= 0: return x if pick is max else y
    if d.vmax <= 0: return y if pick is max else x
    return None
  return mm

def _gather(ins, attrs):
  idx = np.asarray(ins[1])
  if idx.dtype.kind not in "iu" or is_sym(ins[1]): return None
  data = _obj(ins[0])
  axis = attrs.get("axis", 0) % max(data.ndim, 1)
  n = data.shape[axis]
  if np.any((idx < -n) | (idx >= n)): return None   # the handler reports the bad index
  return sym_array(np.take(data, np.where(idx < 0, idx + n, idx), axis=axis))

def _unsqueeze(ins, attrs):
  data, axes = _obj(ins[0]), _axes(ins, attrs)
  if axes is None: return None
  n = data.ndim + len(axes)
  out = data
  for a in sorted(a % n for a in axes): out = np.expand_dims(out, a)
  return sym_array(out)

def _squeeze(ins, attrs):
  data, axes = _obj(ins[0]), _axes(ins, attrs)
  if axes is None: axes = [i for i, s in enumerate(data.shape) if s == 1]
  if any(data.shape[a % data.ndim] != 1 for a in axes): return None
  return sym_array(np.squeeze(data, tuple(a % data.ndim for a in axes)))

def _concat(ins, attrs):
  parts = [_obj(x) for x in ins if x is not None]
  return sym_array(np.concatenate(parts, axis=attrs["axis"]))

def _slice(ins, attrs):
  data = _obj(ins[0])
  if data.ndim != 1 or len(ins) < 3 or any(is_sym(x) for x in ins[1:] if x is not None): return None
  st, en = int(np.asarray(ins[1]).reshape(-1)[0]), int(np.asarray(ins[2]).reshape(-1)[0])
  step = int(np.asarray(ins[4]).reshape(-1)[0]) if len(ins) > 4 and ins[4] is not None else 1
  if step == 0: return None
  return sym_array(data[slice(st, en, step)])

def _cast(ins, attrs):
  # sizes stay sizes through an integer cast; a cast to float/bool needs their values, which only the device has
  return sym_array(_obj(ins[0])) if attrs.get("to") in (6, 7, 12, 13) else None

def _where(ins, attrs):
  c = ins[0]
  if is_sym(c) or np.asarray(c).dtype != np.bool_: return None
  return sym_array(np.where(np.asarray(c), _obj(ins[1]), _obj(ins[2])))

def _reshape(ins, attrs):
  shp = _ints(ins[1])
  if any(isinstance(s, UOp) for s in shp): return None
  data = _obj(ins[0])
  shp = [data.shape[i] if s == 0 and not attrs.get("allowzero", 0) else s for i, s in enumerate(shp)]
  return sym_array(data.reshape(shp))

def _identity(ins, attrs): return ins[0]

FOLDERS: dict[str, Callable[[list, dict], Any]] = {
  "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Concat": _concat, "Slice": _slice, "Cast": _cast,
  "Where": _where, "Reshape": _reshape, "Identity": _identity,
  "Add": _elementwise(lambda x, y: x + y), "Sub": _elementwise(lambda x, y: x - y), "Mul": _elementwise(lambda x, y: x * y),
  "Div": _elementwise(_div), "Equal": _elementwise(_compare("eq")), "Less": _elementwise(_compare("lt")),
  "Greater": _elementwise(_compare("gt")), "Max": _elementwise(_minmax(max)), "Min": _elementwise(_minmax(min)),
}

def fold(op_type: str, ins: list, attrs: dict):
  fn = FOLDERS.get(op_type)
  if fn is None: return None
  try: return fn(ins, attrs)
  except (TypeError, ValueError, IndexError): return None   # not shape arithmetic we can do exactly: the handler runs
