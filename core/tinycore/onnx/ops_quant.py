"""Quantization: QuantizeLinear/DequantizeLinear (per tensor, per axis, blocked), DynamicQuantizeLinear, QLinearMatMul,
QLinearConv, MatMulInteger, ConvInteger. Integer products accumulate in int32, as the spec requires."""
from __future__ import annotations
from tinycore.dtype import dtypes
from tinycore.onnx.registry import op, UnsupportedOpError

_RANGES = {dtypes.uint8: (0, 255), dtypes.int8: (-128, 127), dtypes.uint16: (0, 65535), dtypes.int16: (-32768, 32767)}

def _per_axis(t, x_ndim, axis, block=0, x_shape=None):
  """A scale/zero-point shaped to broadcast against x: scalar, 1-D along `axis`, or blocked along `axis`."""
  if t.ndim == 0 or t.numel() == 1: return t.reshape(())
  axis %= x_ndim
  if block:
    t = t.unsqueeze(axis + 1).expand(*t.shape[:axis + 1], block, *t.shape[axis + 1:])
    t = t.reshape(*t.shape[:axis], -1, *t.shape[axis + 2:])
    return t.shrink(tuple((0, s) for s in x_shape))
  if t.ndim == 1: return t.reshape(*[t.shape[0] if d == axis else 1 for d in range(x_ndim)])
  return t

@op("QuantizeLinear")
def quantize_linear(ctx, ins, attrs):
  x, scale = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  zp = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
  out_dt = zp.dtype if zp is not None else dtypes.uint8
  if "output_dtype" in attrs and attrs["output_dtype"]:
    from tinycore.onnx.context import onnx_dtype
    out_dt = onnx_dtype(attrs["output_dtype"], "QuantizeLinear")
  if out_dt not in _RANGES: raise UnsupportedOpError(f"QuantizeLinear to {out_dt.name}")
  axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
  s = _per_axis(scale, x.ndim, axis, block, x.shape)
  y = (x.cast(dtypes.float32) / s.cast(dtypes.float32)).round()
  if zp is not None: y = y + _per_axis(zp, x.ndim, axis, block, x.shape).cast(dtypes.float32)
  lo, hi = _RANGES[out_dt]
  return y.clip(lo, hi).cast(out_dt)

@op("DequantizeLinear")
def dequantize_linear(ctx, ins, attrs):
  x, scale = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  zp = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
  axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
  xi = x.cast(dtypes.int32) if x.dtype in _RANGES or x.dtype == dtypes.int32 else x.cast(dtypes.float32)
  if zp is not None: xi = xi - _per_axis(zp, x.ndim, axis, block, x.shape).cast(xi.dtype)
  s = _per_axis(scale, x.ndim, axis, block, x.shape)
  return (xi.cast(dtypes.float32) * s.cast(dtypes.float32)).cast(scale.dtype)

@op("DynamicQuantizeLinear")
def dynamic_quantize_linear(ctx, ins, attrs):
  x = ctx.tensor(ins[0]).cast(dtypes.float32)
  lo, hi = x.min().minimum(0), x.max().maximum(0)
  scale = (hi - lo) / 255
  zp = (-lo / scale).round().clip(0, 255)
  y = ((x / scale).round() + zp).clip(0, 255).cast(dtypes.uint8)
  return y, scale, zp.cast(dtypes.uint8)

def _centered(ctx, x, zp, axis_len_dim=None):
  xi = ctx.tensor(x).cast(dtypes.int32)
  if zp is None: return xi
  z = ctx.tensor(zp).cast(dtypes.int32)
  if z.ndim == 1 and z.numel() > 1 and axis_len_dim is not None:
    z = z.reshape(*[z.shape[0] if d == axis_len_dim % xi.ndim else 1 for d in range(xi.ndim)])
  return xi - z

@op("MatMulInteger")
def matmul_integer(ctx, ins, attrs):
  a_zp = ins[2] if len(ins) > 2 else None
  b_zp = ins[3] if len(ins) > 3 else None
  a = _centered(ctx, ins[0], a_zp, -2)   # a's zero point is per row (M)
  b = _centered(ctx, ins[1], b_zp, -1)   # b's zero point is per column (N)
  if a_zp is not None and ctx.tensor(a_zp).ndim == 1 and ctx.tensor(a_zp).numel() > 1:
    a = ctx.tensor(ins[0]).cast(dtypes.int32) - ctx.tensor(a_zp).cast(dtypes.int32).reshape(-1, 1)
  return (a @ b).cast(dtypes.int32)

@op("ConvInteger")
def conv_integer(ctx, ins, attrs):
  from tinycore.onnx.ops_nn import conv
  x = _centered(ctx, ins[0], ins[2] if len(ins) > 2 else None)
  w = _centered(ctx, ins[1], ins[3] if len(ins) > 3 else None, 0)
  return conv(ctx, [x, w], attrs).cast(dtypes.int32)

def _requantize(acc, y_scale, y_zp, out_dt):
  y = (acc / y_scale).round()
  if y_zp is not None: y = y + y_zp.cast(dtypes.float32)
  lo, hi = _RANGES[out_dt]
  return y.clip(lo, hi).cast(out_dt)

@op("QLinearMatMul")
def qlinear_matmul(ctx, ins, attrs):
  a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (ctx.tensor(t) for t in ins)
  a_f = (a.cast(dtypes.int32) - _per_axis(a_zp, a.ndim, -2).cast(dtypes.int32)).cast(dtypes.float32) * _per_axis(a_s, a.ndim, -2).cast(dtypes.float32)
  b_f = (b.cast(dtypes.int32) - _per_axis(b_zp, b.ndim, -1).cast(dtypes.int32)).cast(dtypes.float32) * _per_axis(b_s, b.ndim, -1).cast(dtypes.float32)
  return _requantize(a_f @ b_f, _per_axis(y_s, b.ndim, -1).cast(dtypes.float32), _per_axis(y_zp, b.ndim, -1), y_zp.dtype)

@op("QLinearConv")
def qlinear_conv(ctx, ins, attrs):
  from tinycore.onnx.ops_nn import conv
  x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp = (ctx.tensor(t) for t in ins[:8])
  bias = ctx.tensor(ins[8]) if len(ins) > 8 and ins[8] is not None else None
  xf = (x.cast(dtypes.int32) - x_zp.cast(dtypes.int32)).cast(dtypes.float32) * x_s.cast(dtypes.float32)
  wf = (w.cast(dtypes.int32) - _per_axis(w_zp, w.ndim, 0).cast(dtypes.int32)).cast(dtypes.float32) * _per_axis(w_s, w.ndim, 0).cast(dtypes.float32)
  acc = conv(ctx, [xf, wf], attrs)
  if bias is not None:   # the bias is int32 in the scale x_scale * w_scale
    bscale = (x_s.cast(dtypes.float32) * w_s.cast(dtypes.float32)).reshape(-1)
    acc = acc + (bias.cast(dtypes.float32) * bscale).reshape(1, -1, *[1] * (acc.ndim - 2))
  return _requantize(acc, y_s.cast(dtypes.float32), y_zp, y_zp.dtype)
