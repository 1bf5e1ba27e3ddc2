"""Shape and movement ops: Shape/Reshape/Transpose/Slice/Concat/Split/Pad/Expand/Tile, constants, Range, Trilu, CumSum.

Shape returns a static numpy value, so the shape arithmetic that usually follows it folds on the host."""
from __future__ import annotations
import numpy as np
from tinycore.onnx.registry import op, UnsupportedOpError, is_static
from tinycore.onnx.context import onnx_dtype
from tinycore.onnx.dynamic import sym_array, sym_arange, is_sym

def _opt(ins, i): return ins[i] if len(ins) > i and ins[i] is not None else None

@op("Shape")
def shape(ctx, ins, attrs):
  x = ins[0]
  shp = list(x.shape)
  n = len(shp)
  start, end = attrs.get("start", 0), attrs.get("end", n)
  start, end = max(0, min(n, start + n if start < 0 else start)), max(0, min(n, end + n if end < 0 else end))
  return sym_array(shp[start:end]) if shp[start:end] else np.zeros(0, np.int64)   # symbolic dims stay UOps (dynamic.py)

@op("Size")
def size(ctx, ins, attrs):
  n = 1
  for d in ins[0].shape: n = n * d
  return sym_array(n)

@op("Constant")
def constant(ctx, ins, attrs):
  if "value" in attrs: return np.asarray(attrs["value"])
  if "value_float" in attrs: return np.array(attrs["value_float"], dtype=np.float32)
  if "value_floats" in attrs: return np.array(attrs["value_floats"], dtype=np.float32)
  if "value_int" in attrs: return np.array(attrs["value_int"], dtype=np.int64)
  if "value_ints" in attrs: return np.array(attrs["value_ints"], dtype=np.int64)
  raise UnsupportedOpError(f"Constant with attributes {sorted(attrs)} (sparse or string constants)")

@op("ConstantOfShape")
def constant_of_shape(ctx, ins, attrs):
  shp = ctx.ints(ins[0])
  val = np.asarray(attrs.get("value", np.zeros(1, np.float32))).reshape(-1)
  if all(isinstance(d, int) for d in shp) and int(np.prod(shp)) <= 1 << 16: return np.full(shp, val[0], dtype=val.dtype)
  from tinycore.tensor import Tensor
  return Tensor.full(tuple(shp), val[0].item(), dtype=ctx.tensor(val).dtype, device=ctx.device)

@op("Reshape")
def reshape(ctx, ins, attrs):
  x, shp = ctx.tensor(ins[0]), ctx.ints(ins[1])
  if not attrs.get("allowzero", 0): shp = [x.shape[i] if isinstance(d, int) and d == 0 else d for i, d in enumerate(shp)]
  if -1 in [d for d in shp if isinstance(d, int)] and not all(isinstance(d, int) for d in list(x.shape) + shp):
    # -1 next to symbolic sizes: the size that fits, worked out symbolically (the frontend infers ints only)
    total, known = 1, 1
    for d in x.shape: total = total * d
    for d in shp:
      if not (isinstance(d, int) and d == -1): known = known * d
    from tinycore.onnx.dynamic import norm_sint
    fit = norm_sint(total // known) if isinstance(known, int) else _sym_quotient(total, known)
    shp = [fit if isinstance(d, int) and d == -1 else d for d in shp]
  return x.reshape(shp)

def _sym_quotient(total, known):
  """total / known for symbolic sizes that share factors (B*S*384 / (B*S) = 384); refuses what doesn't divide exactly."""
  from tinycore.onnx.dynamic import norm_sint
  from tinycore.tensor_shapes import bound_value
  tv, kv = bound_value(total), bound_value(known)
  if tv is not None and kv:   # the quotient at this call's sizes, kept only if it holds for every size
    q = tv // kv
    if isinstance(d := norm_sint(total - known * q), int) and d == 0: return q
  raise UnsupportedOpError(f"Reshape with -1: can't divide symbolic size {total} by {known}")

@op("Flatten")
def flatten(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = attrs.get("axis", 1)
  if axis < 0: axis += x.ndim   # -1 is the last dim, not the position after it
  from tinycore.onnx.dynamic import norm_sint
  lead, rest = 1, 1
  for d in x.shape[:axis]: lead = lead * d
  for d in x.shape[axis:]: rest = rest * d
  return x.reshape(norm_sint(lead), norm_sint(rest))

@op("Transpose")
def transpose(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  return x.permute(attrs.get("perm", list(range(x.ndim))[::-1]))

def _axes(ctx, ins, attrs, i=1):
  return attrs["axes"] if "axes" in attrs else (ctx.ints(ins[i]) if _opt(ins, i) is not None else None)

@op("Squeeze")
def squeeze(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axes = _axes(ctx, ins, attrs)
  if axes is None: axes = [i for i, s in enumerate(x.shape) if s == 1]
  axes = [a % x.ndim for a in axes]
  bad = [a for a in axes if x.shape[a] != 1]
  if bad: raise ValueError(f"Squeeze axes {bad} of shape {x.shape} are not 1")
  return x.reshape([s for i, s in enumerate(x.shape) if i not in axes])

@op("Unsqueeze")
def unsqueeze(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axes = _axes(ctx, ins, attrs)
  n = x.ndim + len(axes)
  axes = sorted(a % n for a in axes)
  shp, it = [], iter(x.shape)
  for i in range(n): shp.append(1 if i in axes else next(it))
  return x.reshape(shp)

@op("Concat")
def concat(ctx, ins, attrs):
  ts = [ctx.tensor(t) for t in ins if t is not None]
  if not all(isinstance(d, int) for t in ts for d in t.shape): return _sym_concat(ts, attrs["axis"])
  ts = [t for t in ts if t.numel() > 0] or ts[:1]
  return ts[0].cat(*ts[1:], dim=attrs["axis"]) if len(ts) > 1 else ts[0]

def _sym_concat(ts: list, axis: int):
  """Concat where a size is symbolic: each part padded to the joint size along the axis, then summed (the frontend's
  cat compares sizes as ints)."""
  axis %= ts[0].ndim
  ts = [t for t in ts if not (isinstance(t.shape[axis], int) and t.shape[axis] == 0)]
  total = 0
  for t in ts: total = total + t.shape[axis]
  out, before = None, 0
  for t in ts:
    after = total - before - t.shape[axis]
    from tinycore.onnx.dynamic import norm_sint
    pads = tuple((norm_sint(before), norm_sint(after)) if k == axis else (0, 0) for k in range(t.ndim))
    p = t._wrap(t.uop.pad(pads))   # uop-level: Tensor.pad checks pads for negatives as ints
    # one simplified size for every part, so they broadcast (b+0+1 and 0+b+1 are different expressions)
    p = p.reshape(tuple(norm_sint(total) if k == axis else d for k, d in enumerate(t.shape)))
    out = p if out is None else out + p
    before = before + t.shape[axis]
  return out

@op("Split")
def split(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = attrs.get("axis", 0) % x.ndim
  sizes = attrs.get("split") or (ctx.ints(ins[1]) if _opt(ins, 1) is not None else None)
  if sizes is None:
    n = attrs.get("num_outputs") or ctx.n_outputs
    step = -(-x.shape[axis] // n)
    sizes = [min(step, x.shape[axis] - i * step) for i in range(n)]
  outs, start = [], 0
  for s in sizes:
    outs.append(x.shrink(tuple((start, start + s) if k == axis else (0, d) for k, d in enumerate(x.shape))))
    start += s
  return tuple(outs)

@op("Slice")
def slice_(ctx, ins, attrs):
  x = ins[0]
  if ctx.opset < 10: starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
  else:
    starts, ends = ctx.ints(ins[1]), ctx.ints(ins[2])
    axes = ctx.ints(ins[3]) if _opt(ins, 3) is not None else None
    steps = ctx.ints(ins[4]) if _opt(ins, 4) is not None else None
  ndim = len(x.shape)
  axes = list(range(len(starts))) if axes is None else [a % ndim for a in axes]
  steps = steps or [1] * len(starts)
  if not all(isinstance(v, int) for v in list(starts) + list(ends) + list(x.shape)):
    return _sym_slice(ctx.tensor(x), axes, starts, ends, steps)
  sl = [slice(None)] * ndim
  for a, st, en, sp in zip(axes, starts, ends, steps):
    if sp == 0: raise ValueError("Slice step must not be 0")
    sl[a] = slice(*slice(st, en, sp).indices(x.shape[a]))
  x = ctx.tensor(x)
  if any(s.start == s.stop for s in sl if s != slice(None)):   # an empty slice
    return x.reshape(*x.shape)[tuple(sl)] if all(s.step == 1 or s.step is None for s in sl) else x[tuple(sl)]
  return x[tuple(sl)]

def _sym_slice(x, axes, starts, ends, steps):
  """Slice with symbolic sizes or bounds (dynamic axes): a shrink, step 1. Int bounds are clamped like numpy's where the
  dim is an int; a symbolic bound is taken as is (the shrink refuses one past the dim when the values are bound)."""
  from tinycore.onnx.dynamic import norm_sint
  keep = [(0, d) for d in x.shape]
  for a, st, en, sp in zip(axes, starts, ends, steps):
    if sp != 1: raise UnsupportedOpError("Slice with symbolic sizes and a step other than 1")
    dim = x.shape[a]
    def clamp(v):
      if not isinstance(v, int): return v
      if isinstance(dim, int): return max(0, min(dim, v + dim if v < 0 else v))
      if v < 0: return norm_sint(dim + v)
      return dim if v >= int(dim.vmax) else v   # INT64_MAX ("to the end") and anything past every size: the whole dim
    keep[a] = (clamp(st), clamp(en))
  return x.shrink(tuple(keep))

@op("Expand")
def expand(ctx, ins, attrs):
  x, shp = ctx.tensor(ins[0]), ctx.ints(ins[1])
  if all(isinstance(d, int) for d in list(x.shape) + shp): out = np.broadcast_shapes(tuple(x.shape), tuple(shp))
  else: out = _sym_broadcast(tuple(x.shape), tuple(shp))
  return x.reshape((1,) * (len(out) - x.ndim) + tuple(x.shape)).expand(out)

def _sym_broadcast(a: tuple, b: tuple) -> tuple:
  n = max(len(a), len(b))
  a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
  out = []
  for x, y in zip(a, b):
    if isinstance(x, int) and x == 1: out.append(y)
    elif isinstance(y, int) and y == 1 or x is y or (not isinstance(x, int) and x == y): out.append(x)
    else: raise ValueError(f"Expand: shapes {a} and {b} don't broadcast")
  return tuple(out)

@op("Tile")
def tile(ctx, ins, attrs): return ctx.tensor(ins[0]).repeat(ctx.ints(ins[1]))

_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}

@op("Pad")
def pad(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  mode = attrs.get("mode", "constant")
  if mode not in _PAD_MODES: raise UnsupportedOpError(f"Pad mode {mode!r}")
  if ctx.opset < 11: pads, value = attrs["pads"], attrs.get("value", 0.0)
  else:
    pads = ctx.ints(ins[1])
    value = ctx.scalar(ins[2]) if _opt(ins, 2) is not None else 0
  axes = ctx.ints(ins[3]) if _opt(ins, 3) is not None else list(range(x.ndim))
  axes = [a % x.ndim for a in axes]
  pairs = [(0, 0)] * x.ndim
  for j, a in enumerate(axes): pairs[a] = (pads[j], pads[j + len(axes)])
  if mode == "constant": return x.pad(tuple(pairs), value=value)
  if any(b < 0 or e < 0 for b, e in pairs): raise UnsupportedOpError(f"Pad mode {mode!r} with negative pads")
  return x.pad(tuple(pairs), mode=_PAD_MODES[mode])

@op("Range")
def range_(ctx, ins, attrs):
  # the length depends on the values: a Tensor start/limit/delta is read (realized) here
  start, limit, delta = (ctx.scalar(t) for t in ins)
  if any(is_sym(t) for t in ins): return _sym_range(ctx, start, limit, delta, ins)
  dt = ctx.tensor(ins[0]).dtype if not is_static(ins[0]) else None
  out = np.arange(start, limit, delta, dtype=np.asarray(ins[0]).dtype if is_static(ins[0]) else None)
  return ctx.tensor(out).cast(dt) if dt is not None else out

def _sym_range(ctx, start, limit, delta, ins):
  """Range over symbolic sizes: its length must be an int (past .. past+new) or a symbolic size with delta 1 (0 .. seq)."""
  from tinycore.onnx.dynamic import norm_sint
  if not isinstance(delta, int) or delta == 0: raise UnsupportedOpError("Range with a symbolic bound needs an integer delta")
  n = norm_sint((limit - start + delta - (1 if delta > 0 else -1)) // delta) if isinstance(limit - start, int) else None
  if n is None:
    if delta != 1: raise UnsupportedOpError("Range with a symbolic length needs delta 1")
    n = norm_sint(limit - start)
  if isinstance(n, int): idx = ctx.tensor(np.arange(max(n, 0), dtype=np.int64) * delta)
  else: idx = sym_arange(n, ctx.device) * delta
  from tinycore.onnx.dynamic import sym_scalar
  return idx + (sym_scalar(start, ctx.device) if not isinstance(start, int) else start)

@op("Trilu")
def trilu(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  k = ctx.scalar(ins[1]) if _opt(ins, 1) is not None else 0
  if not all(isinstance(d, int) for d in x.shape[-2:]) or not isinstance(k, int):
    # symbolic rows/cols or diagonal: compare index grids (the frontend's triu/tril need int sizes)
    rows, cols = x.shape[-2], x.shape[-1]
    r, c = sym_arange(rows, x.device).reshape(rows, 1), sym_arange(cols, x.device).reshape(1, cols)
    from tinycore.onnx.dynamic import sym_scalar
    off = (c - r) - (sym_scalar(k, x.device) if not isinstance(k, int) else k)   # the diagonal offset
    keep = (off >= 0) if attrs.get("upper", 1) else (off <= 0)
    return keep.where(x, 0)
  return x.triu(k) if attrs.get("upper", 1) else x.tril(k)

@op("CumSum")
def cumsum(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = ctx.scalar(ins[1]) % x.ndim
  if attrs.get("reverse", 0): x = x.flip(axis)
  y = x.cumsum(axis).cast(x.dtype)
  if attrs.get("exclusive", 0): y = y - x
  return y.flip(axis) if attrs.get("reverse", 0) else y

@op("CumProd", since=24)
def cumprod(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = ctx.scalar(ins[1]) % x.ndim
  if attrs.get("reverse", 0): x = x.flip(axis)
  if attrs.get("exclusive", 0):   # shift by one along the axis, a leading 1
    n = x.shape[axis]
    x = x.shrink(tuple((0, n - 1) if k == axis else (0, s) for k, s in enumerate(x.shape)))
    x = x.pad(tuple((1, 0) if k == axis else (0, 0) for k in range(x.ndim)), value=1)
  y = x.cumprod(axis).cast(x.dtype)
  return y.flip(axis) if attrs.get("reverse", 0) else y

def _window(coeffs):
  """HannWindow/HammingWindow/BlackmanWindow: a sum of cosines of 2*pi*k*n/N, computed on the host (the size is static)."""
  def handler(ctx, ins, attrs):
    size = int(ctx.scalar(ins[0]))
    if size < 0: raise ValueError(f"window size must not be negative, got {size}")
    n = np.arange(size, dtype=np.float64)
    denom = size if attrs.get("periodic", 1) else size - 1
    w = sum(c * np.cos(2 * np.pi * k * n / denom) for k, c in enumerate(coeffs)) if denom > 0 else np.ones(size)
    to = onnx_dtype(attrs.get("output_datatype", 1), "window output_datatype")
    return w.astype(to.np) if to.fmt else ctx.tensor(w.astype(np.float32)).cast(to)
  return handler

op("HannWindow", since=17)(_window((0.5, -0.5)))
op("HammingWindow", since=17)(_window((25 / 46, -21 / 46)))
op("BlackmanWindow", since=17)(_window((0.42, -0.5, 0.08)))

@op("EyeLike")
def eye_like(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  from tinycore.tensor import Tensor
  n, m = x.shape
  k = attrs.get("k", 0)
  r = Tensor.arange(n, device=x.device).reshape(n, 1)
  c = Tensor.arange(m, device=x.device).reshape(1, m)
  dt = onnx_dtype(attrs["dtype"]) if "dtype" in attrs else x.dtype
  return (c - r == k).cast(dt)

@op("DepthToSpace")
def depth_to_space(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  b = attrs["blocksize"]
  n, c, h, w = x.shape
  if attrs.get("mode", "DCR") == "DCR": y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
  else: y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
  return y.reshape(n, c // (b * b), h * b, w * b)

@op("SpaceToDepth")
def space_to_depth(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  b = attrs["blocksize"]
  n, c, h, w = x.shape
  perm = (0, 1, 3, 5, 2, 4) if attrs.get("mode", "DCR") == "CRD" else (0, 3, 5, 1, 2, 4)   # CRD (opset 25): channel-major
  return x.reshape(n, c, h // b, b, w // b, b).permute(*perm).reshape(n, c * b * b, h // b, w // b)
