"""Neural-network ops: MatMul/Gemm, convolutions, pooling, normalizations, softmax."""
from __future__ import annotations
import math
from tinycore.dtype import dtypes
from tinycore.onnx.registry import op, UnsupportedOpError

@op("MatMul")
def matmul(ctx, ins, attrs): return ctx.tensor(ins[0]) @ ctx.tensor(ins[1])

@op("Gemm")
def gemm(ctx, ins, attrs):
  a, b = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  if attrs.get("transA", 0): a = a.transpose()
  if attrs.get("transB", 0): b = b.transpose()
  y = a @ b
  alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
  if alpha != 1.0: y = y * alpha
  if len(ins) > 2 and ins[2] is not None: y = y + ctx.tensor(ins[2]) * beta if beta != 1.0 else y + ctx.tensor(ins[2])
  return y

def _flat_pads(pairs):
  # tinycore takes flat torch-style padding: the last spatial dim first, (begin, end) each
  return [p for pair in reversed(pairs) for p in pair]

def _spatial_pads(attrs, in_sp, k_, s_, d_, what: str) -> list[tuple[int, int]]:
  """ONNX pads/auto_pad as (begin, end) per spatial dim."""
  n = len(k_)
  auto = attrs.get("auto_pad", "NOTSET")
  if auto in ("NOTSET", ""):
    p = attrs.get("pads", [0] * 2 * n)
    if len(p) != 2 * n: raise ValueError(f"{what}: pads {p} must have {2 * n} entries for {n} spatial dims")
    return [(p[i], p[i + n]) for i in range(n)]
  if auto == "VALID": return [(0, 0)] * n
  if auto not in ("SAME_UPPER", "SAME_LOWER"): raise UnsupportedOpError(f"{what}: auto_pad {auto!r}")
  out = []
  for i, k, s, d in zip(in_sp, k_, s_, d_):
    total = max((math.ceil(i / s) - 1) * s + (k - 1) * d + 1 - i, 0)
    small, big = total // 2, total - total // 2
    out.append((small, big) if auto == "SAME_UPPER" else (big, small))
  return out

def _conv_inputs(ctx, ins, attrs):
  """Conv's and ConvTranspose's shared operands: input, weight, optional bias, kernel size, strides, dilations."""
  x, w = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  b = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
  k_ = tuple(w.shape[2:])
  return x, w, b, k_, len(k_), attrs.get("strides", [1] * len(k_)), attrs.get("dilations", [1] * len(k_))

@op("Conv")
def conv(ctx, ins, attrs):
  x, w, b, k_, n, s_, d_ = _conv_inputs(ctx, ins, attrs)
  pads = _spatial_pads(attrs, x.shape[2:], k_, s_, d_, "Conv")
  return x.conv2d(w, b, groups=attrs.get("group", 1), stride=tuple(s_), dilation=tuple(d_), padding=_flat_pads(pads))

@op("ConvTranspose")
def conv_transpose(ctx, ins, attrs):
  x, w, b, k_, n, s_, d_ = _conv_inputs(ctx, ins, attrs)
  op_ = list(attrs.get("output_padding", [0] * n))
  in_sp = x.shape[2:]
  if "output_shape" in attrs:
    out_sp = attrs["output_shape"][-n:]
    pads = []
    for j in range(n):
      total = s_[j] * (in_sp[j] - 1) + op_[j] + (k_[j] - 1) * d_[j] + 1 - out_sp[j]
      if total < 0: op_[j], total = op_[j] - total, 0   # a larger output_shape grows the far end
      lo = total // 2 if attrs.get("auto_pad", "NOTSET") == "SAME_UPPER" else total - total // 2
      pads.append((lo, total - lo))
  elif attrs.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
    pads = []
    for j in range(n):
      total = max(s_[j] * (in_sp[j] - 1) + op_[j] + (k_[j] - 1) * d_[j] + 1 - in_sp[j] * s_[j], 0)
      lo = total // 2 if attrs["auto_pad"] == "SAME_UPPER" else total - total // 2
      pads.append((lo, total - lo))
  else: pads = _spatial_pads({k: v for k, v in attrs.items() if k != "auto_pad"} if attrs.get("auto_pad") == "VALID" else attrs,
                             in_sp, k_, s_, d_, "ConvTranspose")
  return x.conv_transpose2d(w, b, groups=attrs.get("group", 1), stride=tuple(s_), dilation=tuple(d_), padding=_flat_pads(pads),
                            output_padding=tuple(op_))

def _pool_setup(x, attrs, what):
  k_ = tuple(attrs["kernel_shape"]); n = len(k_)
  s_, d_ = tuple(attrs.get("strides", [1] * n)), tuple(attrs.get("dilations", [1] * n))
  pads = _spatial_pads(attrs, x.shape[2:], k_, s_, d_, what)
  return k_, s_, d_, pads

@op("MaxPool")
def max_pool(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  if attrs.get("storage_order", 0): raise UnsupportedOpError("MaxPool with storage_order=1 (column-major indices)")
  k_, s_, d_, pads = _pool_setup(x, attrs, "MaxPool")
  ceil = bool(attrs.get("ceil_mode", 0))
  out, idx = x.max_pool2d(k_, s_, d_, _flat_pads(pads), ceil_mode=ceil, return_indices=True)
  # ONNX indices count over the whole tensor (n, c, *spatial), tinycore's over the spatial dims
  sp = math.prod(x.shape[2:])
  from tinycore.tensor import Tensor
  base = (Tensor.arange(x.shape[0] * x.shape[1], device=x.device).reshape(x.shape[0], x.shape[1], *[1] * len(k_)) * sp).cast(dtypes.int64)
  return out, idx.cast(dtypes.int64) + base

@op("AveragePool")
def average_pool(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  k_, s_, d_, pads = _pool_setup(x, attrs, "AveragePool")
  return x.avg_pool2d(k_, s_, d_, _flat_pads(pads), ceil_mode=bool(attrs.get("ceil_mode", 0)),
                      count_include_pad=bool(attrs.get("count_include_pad", 0)))

@op("GlobalAveragePool")
def global_average_pool(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  return x.mean(axis=tuple(range(2, x.ndim)), keepdim=True)

@op("GlobalMaxPool")
def global_max_pool(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  return x.max(axis=tuple(range(2, x.ndim)), keepdim=True)

def _channel_view(t, ndim):
  return t.reshape(1, -1, *[1] * (ndim - 2))

@op("BatchNormalization")
def batch_norm(ctx, ins, attrs):
  if attrs.get("training_mode", 0): raise UnsupportedOpError("BatchNormalization with training_mode=1 (tinycore.onnx runs inference graphs)")
  x, scale, bias, mean, var = (ctx.tensor(t) for t in ins[:5])
  eps = attrs.get("epsilon", 1e-5)
  inv = (var + eps).rsqrt()
  return (x - _channel_view(mean, x.ndim)) * _channel_view(inv * scale, x.ndim) + _channel_view(bias, x.ndim)

@op("InstanceNormalization")
def instance_norm(ctx, ins, attrs):
  x, scale, bias = (ctx.tensor(t) for t in ins[:3])
  axes = tuple(range(2, x.ndim))
  mean = x.mean(axis=axes, keepdim=True)
  var = ((x - mean) ** 2).mean(axis=axes, keepdim=True)
  y = (x - mean) * (var + attrs.get("epsilon", 1e-5)).rsqrt()
  return y * _channel_view(scale, x.ndim) + _channel_view(bias, x.ndim)

@op("LayerNormalization")
def layer_norm(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  scale = ctx.tensor(ins[1])
  bias = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else None
  axis = attrs.get("axis", -1) % x.ndim
  axes = tuple(range(axis, x.ndim))
  xf = x.cast(dtypes.float32) if x.dtype != dtypes.float64 else x
  mean = xf.mean(axis=axes, keepdim=True)
  var = ((xf - mean) ** 2).mean(axis=axes, keepdim=True)
  inv = (var + attrs.get("epsilon", 1e-5)).rsqrt()
  y = ((xf - mean) * inv).cast(x.dtype) * scale
  if bias is not None: y = y + bias
  return y, mean, inv

@op("RMSNormalization", since=23)
def rms_norm(ctx, ins, attrs):
  x, scale = ctx.tensor(ins[0]), ctx.tensor(ins[1])
  axis = attrs.get("axis", -1) % x.ndim
  xf = x.cast(dtypes.float32) if x.dtype != dtypes.float64 else x   # stash_type: statistics in float32
  inv = ((xf * xf).mean(axis=tuple(range(axis, x.ndim)), keepdim=True) + attrs.get("epsilon", 1e-5)).rsqrt()
  return (xf * inv).cast(x.dtype) * scale

@op("GroupNormalization", since=18)
def group_norm(ctx, ins, attrs):
  x, scale, bias = (ctx.tensor(t) for t in ins[:3])
  g = attrs["num_groups"]
  n, c = x.shape[0], x.shape[1]
  xg = x.reshape(n, g, -1)
  mean = xg.mean(axis=-1, keepdim=True)
  var = ((xg - mean) ** 2).mean(axis=-1, keepdim=True)
  y = ((xg - mean) * (var + attrs.get("epsilon", 1e-5)).rsqrt()).reshape(x.shape)
  if scale.shape[0] != c:   # opset 18: one scale/bias per group
    scale, bias = scale.reshape(g, 1).expand(g, c // g).reshape(c), bias.reshape(g, 1).expand(g, c // g).reshape(c)
  return y * _channel_view(scale, x.ndim) + _channel_view(bias, x.ndim)

@op("LpNormalization")
def lp_norm(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axis, p = attrs.get("axis", -1), attrs.get("p", 2)
  norm = x.abs().sum(axis, keepdim=True) if p == 1 else (x * x).sum(axis, keepdim=True).sqrt()
  return (norm == 0).where(0.0, x / norm).cast(x.dtype)   # an all-zero slice stays 0 (ONNX), not 0/0

@op("MeanVarianceNormalization")
def mvn(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  axes = tuple(attrs.get("axes", [0, 2, 3]))
  mean = x.mean(axis=axes, keepdim=True)
  std = ((x - mean) ** 2).mean(axis=axes, keepdim=True).sqrt()
  return (x - mean) / (std + 1e-9)

@op("LRN")
def lrn(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  size, alpha, beta, bias = attrs["size"], attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
  c = x.shape[1]
  sq = (x * x).pad(((0, 0), ((size - 1) // 2, math.ceil((size - 1) / 2)), *[(0, 0)] * (x.ndim - 2)))
  acc = sq[:, 0:c]
  for j in range(1, size): acc = acc + sq[:, j:j + c]
  return x / (bias + alpha / size * acc) ** beta

def _softmax_like(fn):
  def handler(ctx, ins, attrs):
    x = ctx.tensor(ins[0])
    if ctx.opset < 13:   # older opsets flatten to 2-D at `axis` and normalize over everything after it
      axis = attrs.get("axis", 1) % x.ndim
      return fn(x.reshape(math.prod(x.shape[:axis]), -1), -1).reshape(x.shape)
    return fn(x, attrs.get("axis", -1))
  return handler

def _hardmax(x, axis):
  from tinycore.tensor import Tensor
  idx = x.argmax(axis, keepdim=True)
  n = x.shape[axis]
  ar = Tensor.arange(n, device=x.device).reshape(*[n if d == axis % x.ndim else 1 for d in range(x.ndim)])
  return (ar == idx).cast(x.dtype)

op("Softmax")(_softmax_like(lambda x, a: x.softmax(a)))
op("LogSoftmax")(_softmax_like(lambda x, a: x.log_softmax(a)))
op("Hardmax")(_softmax_like(_hardmax))

def _nll(ctx, logp, target, weight, attrs):
  from tinycore.tensor import Tensor
  c = logp.shape[1]
  target = ctx.tensor(target).cast(dtypes.int32)
  ignore = attrs.get("ignore_index")
  keep = (target != ignore) if ignore is not None else None
  cls = Tensor.arange(c, device=logp.device).reshape(1, c, *[1] * (logp.ndim - 2))
  onehot = target.unsqueeze(1) == cls   # an ignored target matches no class, so it picks 0
  picked = onehot.where(logp, 0).sum(1)
  w = onehot.where(ctx.tensor(weight).reshape(1, c, *[1] * (logp.ndim - 2)), 0).sum(1) if weight is not None else None
  if w is None: w = keep.cast(logp.dtype) if keep is not None else picked.ones_like()
  elif keep is not None: w = keep.where(w, 0)
  loss = -picked * w
  red = attrs.get("reduction", "mean")
  if red == "none": return loss.cast(logp.dtype)
  if red == "sum": return loss.sum().cast(logp.dtype)
  if red == "mean": return (loss.sum() / w.sum()).cast(logp.dtype)
  raise UnsupportedOpError(f"loss reduction {red!r}")

@op("NegativeLogLikelihoodLoss")
def nll_loss(ctx, ins, attrs):
  return _nll(ctx, ctx.tensor(ins[0]), ins[1], ins[2] if len(ins) > 2 else None, attrs)

@op("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(ctx, ins, attrs):
  x = ctx.tensor(ins[0])
  logp = x.log_softmax(1)
  loss = _nll(ctx, logp, ins[1], ins[2] if len(ins) > 2 else None, attrs)
  return (loss, logp) if ctx.n_outputs > 1 else loss
