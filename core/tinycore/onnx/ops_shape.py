"""Shape and movement ops: Shape/Reshape/Transpose/Slice/Concat/Split/Pad/Expand/Tile, constants, Range, Trilu, CumSum.

Shape returns a static numpy value, so the shape arithmetic that usually follows it folds on the host."""
from __future__ import annotations
import numpy as np
from tinycore.onnx.registry import op, UnsupportedOpError, is_static
from tinycore.onnx.context import onnx_dtype

def _opt(ins, i): return ins[i] if len(ins) > i and ins[i] is not None else None

@op("Shape")
def shape(ctx, ins, attrs):
  x = ins[0]
  shp = list(x.shape)
  if not all(isinstance(d, int) for d in shp): raise UnsupportedOpError("Shape of a tensor with symbolic dims")
  n = len(shp)
  start, end = attrs.get("start", 0), attrs.get("end", n)
  start, end = max(0, min(n, start + n if start < 0 else start)), max(0, min(n, end + n if end < 0 else end))
  return np.array(shp[start:end], dtype=np.int64)

@op("Size")
def size(ctx, ins, attrs): return np.array(int(np.prod(ins[0].shape)), dtype=np.int64)

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
  if int(np.prod(shp)) <= 1 << 16: return np.full(shp, val[0], dtype=val.dtype)
  from tinycore.tensor import Tensor
  return Tensor.full(tuple(shp), val[0].item(), dtype=ctx.tensor(val).dtype, device=ctx.device)

@op("Reshape")
def reshape(ctx, ins, attrs):
  x, shp = ctx.tensor(ins[0]), ctx.ints(ins[1])
  if not attrs.get("allowzero", 0): shp = [x.shape[i] if d == 0 else d for i, d in enumerate(shp)]
  return x.reshape(shp)

@op("Flatten")
def flatten(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = attrs.get("axis", 1)
  if axis < 0: axis += x.ndim   # -1 is the last dim, not the position after it
  return x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))

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
  ts = [t for t in ts if t.numel() > 0] or ts[:1]
  return ts[0].cat(*ts[1:], dim=attrs["axis"]) if len(ts) > 1 else ts[0]

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
    outs.append(x[(slice(None),) * axis + (slice(start, start + s),)])
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
  sl = [slice(None)] * ndim
  for a, st, en, sp in zip(axes, starts, ends, steps):
    if sp == 0: raise ValueError("Slice step must not be 0")
    sl[a] = slice(*slice(st, en, sp).indices(x.shape[a]))
  x = ctx.tensor(x)
  if any(s.start == s.stop for s in sl if s != slice(None)):   # an empty slice
    return x.reshape(*x.shape)[tuple(sl)] if all(s.step == 1 or s.step is None for s in sl) else x[tuple(sl)]
  return x[tuple(sl)]

@op("Expand")
def expand(ctx, ins, attrs):
  x, shp = ctx.tensor(ins[0]), ctx.ints(ins[1])
  out = np.broadcast_shapes(tuple(x.shape), tuple(shp))
  return x.reshape((1,) * (len(out) - x.ndim) + tuple(x.shape)).expand(out)

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
  dt = ctx.tensor(ins[0]).dtype if not is_static(ins[0]) else None
  out = np.arange(start, limit, delta, dtype=np.asarray(ins[0]).dtype if is_static(ins[0]) else None)
  return ctx.tensor(out).cast(dt) if dt is not None else out

@op("Trilu")
def trilu(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  k = ctx.scalar(ins[1]) if _opt(ins, 1) is not None else 0
  return x.triu(k) if attrs.get("upper", 1) else x.tril(k)

@op("CumSum")
def cumsum(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis = ctx.scalar(ins[1]) % x.ndim
  if attrs.get("reverse", 0): x = x.flip(axis)
  y = x.cumsum(axis).cast(x.dtype)
  if attrs.get("exclusive", 0): y = y - x
  return y.flip(axis) if attrs.get("reverse", 0) else y

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
  return x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4).reshape(n, c * b * b, h // b, w // b)
