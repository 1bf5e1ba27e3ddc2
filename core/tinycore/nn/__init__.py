"""Layers with tinygrad's names, shapes and initialization. A layer is a plain object holding Tensors; calling it is a
function of Tensor ops, so autograd and the scheduler see nothing special."""
from __future__ import annotations
import math
from tinycore.tensor import Tensor
from tinycore.dtype import dtypes
from tinycore.helpers import prod, make_tuple

def _filled(shape, v: float, dtype=dtypes.float32, requires_grad=None) -> Tensor:
  # a buffer of its own: Tensor.ones/zeros are hash-consed constants, so two layers' weights would be one UOp and share grads
  import numpy as np
  return Tensor(np.full(make_tuple(shape, 1), v, dtype=dtype.np), dtype=dtype, requires_grad=requires_grad)

class Linear:
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    # torch's default: kaiming_uniform(a=sqrt(5)) for the weight, U(-1/sqrt(in), 1/sqrt(in)) for the bias
    self.weight = Tensor.kaiming_uniform(out_features, in_features, a=math.sqrt(5))
    bound = 1 / math.sqrt(in_features)
    self.bias = Tensor.uniform(out_features, low=-bound, high=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight.transpose(), self.bias)

class Conv2d:
  """N-d convolution (the kernel's length picks the number of spatial dims), weights (out, in/groups, *kernel)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True):
    self.kernel_size = make_tuple(kernel_size, 2)
    self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
    if in_channels % groups or out_channels % groups: raise ValueError(f"channels ({in_channels}, {out_channels}) must divide by groups={groups}")
    self.weight = Tensor.kaiming_uniform(out_channels, in_channels // groups, *self.kernel_size, a=math.sqrt(5))
    bound = 1 / math.sqrt(prod(self.weight.shape[1:]))
    self.bias = Tensor.uniform(out_channels, low=-bound, high=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding)

def Conv1d(in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True) -> Conv2d:
  return Conv2d(in_channels, out_channels, make_tuple(kernel_size, 1), stride, padding, dilation, groups, bias)

class ConvTranspose2d(Conv2d):
  """Weights (in, out/groups, *kernel), like torch."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, dilation=1, groups: int = 1,
               bias: bool = True):
    self.kernel_size = make_tuple(kernel_size, 2)
    self.stride, self.padding, self.dilation, self.groups, self.output_padding = stride, padding, dilation, groups, output_padding
    if in_channels % groups or out_channels % groups: raise ValueError(f"channels ({in_channels}, {out_channels}) must divide by groups={groups}")
    self.weight = Tensor.kaiming_uniform(in_channels, out_channels // groups, *self.kernel_size, a=math.sqrt(5))
    bound = 1 / math.sqrt(prod(self.weight.shape[1:]))
    self.bias = Tensor.uniform(out_channels, low=-bound, high=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding,
                              output_padding=self.output_padding)

def _normalize(x: Tensor, axis, eps: float) -> Tensor:
  """(x - mean) / sqrt(var + eps) over `axis`, with the biased variance (what every norm layer uses)."""
  xc = x - x.mean(axis=axis, keepdim=True)
  return xc * (xc.square().mean(axis=axis, keepdim=True) + eps).rsqrt()

class BatchNorm:
  """Normalizes over every axis but 1. Training uses batch statistics and updates the running ones in place."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float = 0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight: Tensor | None = _filled(sz, 1) if affine else None
    self.bias: Tensor | None = _filled(sz, 0) if affine else None
    self.num_batches_tracked = _filled(1, 0, dtypes.int32, requires_grad=False)
    if track_running_stats: self.running_mean, self.running_var = _filled(sz, 0, requires_grad=False), _filled(sz, 1, requires_grad=False)
  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    axes = tuple(i for i in range(x.ndim) if i != 1)
    if Tensor.training or not self.track_running_stats:
      mean = x.mean(axis=axes)
      var = (x - mean.reshape(_bshape(x, mean))).square().mean(axis=axes)
      return mean, var
    return self.running_mean, self.running_var
  def __call__(self, x: Tensor) -> Tensor:
    mean, var = self.calc_stats(x)
    if Tensor.training and self.track_running_stats:
      n = x.numel() // x.shape[1]  # type: ignore[operator]
      # running_var keeps the unbiased estimate, like torch; stats don't carry gradient
      self.running_mean.assign((1 - self.momentum) * self.running_mean + self.momentum * mean.detach())
      self.running_var.assign((1 - self.momentum) * self.running_var + self.momentum * var.detach() * (n / max(n - 1, 1)))
      self.num_batches_tracked.assign(self.num_batches_tracked + 1)
    y = (x - mean.reshape(_bshape(x, mean))) * (var + self.eps).rsqrt().reshape(_bshape(x, var))
    if self.weight is not None: y = y * self.weight.reshape(_bshape(x, self.weight))
    if self.bias is not None: y = y + self.bias.reshape(_bshape(x, self.bias))
    return y
BatchNorm2d = BatchNorm1d = BatchNorm3d = BatchNorm

def _bshape(x: Tensor, v: Tensor) -> tuple:
  """Shape that broadcasts a per-channel vector against x's axis 1."""
  return (1, v.shape[0]) + (1,) * (x.ndim - 2)

class LayerNorm:
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape = make_tuple(normalized_shape, 1)
    self.axis, self.eps, self.elementwise_affine = tuple(-1 - i for i in range(len(self.normalized_shape))), eps, elementwise_affine
    self.weight, self.bias = (_filled(self.normalized_shape, 1), _filled(self.normalized_shape, 0)) if elementwise_affine else (None, None)
  def __call__(self, x: Tensor) -> Tensor:
    if tuple(x.shape[-len(self.normalized_shape):]) != self.normalized_shape:
      raise ValueError(f"LayerNorm over {self.normalized_shape} got an input of shape {x.shape}")
    x = _normalize(x, self.axis, self.eps)
    return x * self.weight + self.bias if self.elementwise_affine else x

class LayerNorm2d(LayerNorm):
  """LayerNorm over the channel axis of an NCHW tensor."""
  def __call__(self, x: Tensor) -> Tensor: return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

class RMSNorm:
  def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
    self.eps = eps
    self.weight = _filled(dim, 1) if elementwise_affine else None
  def _norm(self, x: Tensor) -> Tensor: return x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()
  def __call__(self, x: Tensor) -> Tensor:
    x = self._norm(x.float()).cast(x.dtype)
    return x * self.weight if self.weight is not None else x

class GroupNorm:
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    if num_channels % num_groups: raise ValueError(f"num_channels={num_channels} must divide by num_groups={num_groups}")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight, self.bias = (_filled(num_channels, 1), _filled(num_channels, 0)) if affine else (None, None)
  def __call__(self, x: Tensor) -> Tensor:
    y = _normalize(x.reshape(x.shape[0], self.num_groups, -1), -1, self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return y
    return y * self.weight.reshape(_bshape(x, self.weight)) + self.bias.reshape(_bshape(x, self.bias))

class InstanceNorm:
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight, self.bias = (_filled(num_features, 1), _filled(num_features, 0)) if affine else (None, None)
  def __call__(self, x: Tensor) -> Tensor:
    y = _normalize(x.reshape(x.shape[0], x.shape[1], -1), -1, self.eps).reshape(x.shape)
    if self.weight is None or self.bias is None: return y
    return y * self.weight.reshape(_bshape(x, self.weight)) + self.bias.reshape(_bshape(x, self.bias))

class Embedding:
  """Rows of `weight` picked by integer indices; a one-hot product, so it is differentiable and fuses into one kernel."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    self.weight = Tensor.glorot_uniform(vocab_size, embed_size)
  def __call__(self, idx: Tensor) -> Tensor:
    if not dtypes.is_int(idx.dtype): raise TypeError(f"Embedding needs integer indices, got {idx.dtype}")
    arange = Tensor.arange(self.vocab_sz, device=idx.device).reshape(*((1,) * idx.ndim), self.vocab_sz)
    onehot = (idx.unsqueeze(-1) == arange).cast(self.weight.dtype)
    return onehot.reshape(*idx.shape, self.vocab_sz, 1).mul(self.weight).sum(-2)

class LSTMCell:
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    self.hidden_size = hidden_size
    stdv = 1.0 / math.sqrt(hidden_size)
    self.weight_ih = Tensor.uniform(hidden_size * 4, input_size, low=-stdv, high=stdv)
    self.weight_hh = Tensor.uniform(hidden_size * 4, hidden_size, low=-stdv, high=stdv)
    self.bias_ih, self.bias_hh = (Tensor.uniform(hidden_size * 4, low=-stdv, high=stdv),
                                  Tensor.uniform(hidden_size * 4, low=-stdv, high=stdv)) if bias else (None, None)
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if hc is None: hc = (Tensor.zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device),) * 2
    h, c = hc
    gates = x.linear(self.weight_ih.transpose(), self.bias_ih) + h.linear(self.weight_hh.transpose(), self.bias_hh)
    H = self.hidden_size
    i, f, g, o = (gates[:, k * H:(k + 1) * H] for k in range(4))  # torch's gate order
    new_c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    new_h = o.sigmoid() * new_c.tanh()
    return new_h.contiguous(), new_c.contiguous()

from tinycore.nn import optim, state  # noqa: E402  (tinygrad exposes nn.optim and nn.state as attributes)
