"""Neural-network ops composed from the core: normalization, attention, convolution and pooling, interpolation, losses."""
from __future__ import annotations
import math
from typing import TYPE_CHECKING
from tinycore.dtype import dtypes, to_dtype, least_upper_dtype, least_upper_float
from tinycore.helpers import prod, make_tuple, flatten
from tinycore.tensor_base import TensorBase, tensor_type
from tinycore.tensor_errors import ArgumentError, ShapeError
from tinycore import conv_winograd   # at import: its WINOGRAD setting must exist before a Context(WINOGRAD=...) names it
if TYPE_CHECKING: from tinycore.tensor import Tensor

def _reduction(x, reduction: str):
  if reduction == "mean": return x.mean()
  if reduction == "sum": return x.sum()
  if reduction == "none": return x
  raise ValueError(f"reduction must be 'mean', 'sum' or 'none', not {reduction!r}")

def _check_labels(Y, c: int, ignore_index, what: str) -> None:
  """Class labels already known (a buffer in memory or a constant) must name one of the c classes or be ignore_index,
  as torch insists: the one-hot compare would otherwise give a quiet zero (or NaN) loss for label c + 5. Labels still
  to be computed are not forced to run here."""
  from tinycore.uop import Ops
  from tinycore.helpers import all_int
  if not isinstance(Y.device, str) or not all_int(Y.shape) or Y.uop.base.op not in (Ops.BUFFER, Ops.CONST) or Y.numel() == 0: return
  v = Y.numpy().reshape(-1)
  if ignore_index is not None: v = v[v != ignore_index]
  bad = v[(v < 0) | (v >= c)]
  if bad.size:
    also = f" or ignore_index {ignore_index}" if ignore_index is not None else ""
    raise IndexError(f"{what}: target {bad[0]} is out of bounds: labels must be in [0, {c}){also}")

class TargetShapeError(ValueError, RuntimeError):
  """A loss target whose shape doesn't fit the input: a ValueError here, the RuntimeError torch and tinygrad raise."""

class NNMixin(TensorBase):
  __slots__ = ()

  # ---- normalization and attention
  def layernorm(self, axis=-1, eps: float = 1e-5):
    y = self - self.mean(axis, keepdim=True)
    return y.mul((y * y).mean(axis, keepdim=True).add(eps).rsqrt())
  def batchnorm(self, weight, bias, mean, invstd, axis=1):
    axes = tuple(self._resolve_dim(a) for a in make_tuple(axis, 1))
    shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
    for name, t in (("weight", weight), ("bias", bias), ("mean", mean)):
      if t is not None and t.numel() != prod(shape):
        raise ValueError(f"batchnorm {name} of shape {t.shape} doesn't match {shape} for input {self.shape}")
    x = self - mean.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    x = x * (invstd.reshape(shape) if invstd.ndim == len(axes) else invstd)
    return x + bias.reshape(shape) if bias is not None else x
  def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p: float = 0.0, is_causal: bool = False, enable_gqa: bool = False):
    """softmax(q k^T / sqrt(d) + mask) v. is_causal masks keys after each query (top-left aligned, as torch); enable_gqa
    lets key/value have fewer heads (dim -3) than the query, each shared by a group of query heads."""
    Tensor = tensor_type()
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2:
      raise ShapeError(f"attention needs at least 2-d q/k/v, got {self.shape}, {key.shape}, {value.shape}")
    if self.shape[-1] != key.shape[-1]: raise ShapeError(f"query and key feature sizes differ: {self.shape} vs {key.shape}")
    if key.shape[-2] != value.shape[-2]: raise ShapeError(f"key and value lengths differ: {key.shape} vs {value.shape}")
    if enable_gqa and self.ndim >= 3 and key.ndim >= 3 and key.shape[-3] != self.shape[-3]:
      hq, hk = self.shape[-3], key.shape[-3]
      if value.shape[-3] != hk or hq % hk:
        raise ShapeError(f"grouped-query attention needs query heads ({hq}) to be a multiple of key/value heads ({hk}, {value.shape[-3]})")
      key, value = key.repeat_interleave(hq // hk, -3), value.repeat_interleave(hq // hk, -3)
    if is_causal and attn_mask is not None: raise ArgumentError("pass either attn_mask or is_causal, not both")
    if attn_mask is None and 0 <= dropout_p <= 1 and (dropout_p == 0 or not Tensor.training):
      from tinycore.tensor_attention import fused_attention
      if (out := fused_attention(self, key, value, is_causal)) is not None: return out
    qk = self.matmul(key.transpose(-2, -1)) * (1 / math.sqrt(self.shape[-1]))
    if is_causal:
      if attn_mask is not None: raise ArgumentError("pass either attn_mask or is_causal, not both")
      attn_mask = Tensor.ones(qk.shape[-2], qk.shape[-1], dtype=dtypes.bool, device=self.device).tril()
    if attn_mask is not None:
      qk = attn_mask.where(qk, -math.inf) if attn_mask.dtype == dtypes.bool else qk + attn_mask
    w = qk.softmax(-1)
    # a row whose every key is masked out gives zeros, as torch does, not 0/0 = NaN
    if attn_mask is not None: w = (qk.max(-1, keepdim=True) == -math.inf).where(0, w)
    return w.dropout(dropout_p).matmul(value)
  def normalize(self, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """x / max(||x||_p over `dim`, eps), like torch.nn.functional.normalize."""
    x = self._float()
    if p == 2: norm = (x * x).sum(dim, keepdim=True).sqrt()
    elif p == 0: norm = (x != 0).sum(dim, keepdim=True).cast(x.dtype)   # the "0-norm" counts nonzeros (torch)
    elif p == math.inf: norm = x.abs().max(dim, keepdim=True)
    elif p == -math.inf: norm = x.abs().min(dim, keepdim=True)
    else: norm = x.abs().pow(p).sum(dim, keepdim=True).pow(1 / p)
    return x / norm.maximum(eps)

  # ---- convolution and pooling
  def _resolve_pads(self, padding, d: int) -> list[tuple[int, int]]:
    """int, per-dim ints, or 2*d torch-style flat pads (last dim first) -> (before, after) per spatial dim."""
    if isinstance(padding, int): return [(padding, padding)] * d
    p = tuple(padding)
    if len(p) == d: return [(x, x) for x in p]
    if len(p) == 2 * d: return [(p[i], p[i + 1]) for i in range(2 * d - 2, -1, -2)]
    raise ArgumentError(f"padding {padding} must be an int or have {d} or {2 * d} entries for {d} spatial dims")
  def conv2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, dtype=None):
    """N-d convolution (cross-correlation, like torch): input (bs, cin, *spatial), weight (cout, cin/groups, *kernel)."""
    if self.ndim < 3 or weight.ndim != self.ndim:
      raise ValueError(f"conv needs input (bs, cin, *spatial) and weight (cout, cin/groups, *kernel) of the same rank, "
                       f"got {self.shape} and {weight.shape}")
    bs, cin, cout, k_ = self.shape[0], self.shape[1], weight.shape[0], tuple(weight.shape[2:])
    d = len(k_)
    if groups <= 0 or cin != weight.shape[1] * groups:
      raise ValueError(f"conv input channels {cin} != weight {weight.shape} in-channels {weight.shape[1]} * groups {groups}")
    if cout % groups: raise ValueError(f"conv output channels {cout} are not divisible by groups {groups}")
    if bias is not None and bias.shape != (cout,): raise ValueError(f"conv bias shape {bias.shape} must be ({cout},)")
    if isinstance(padding, str):
      if padding == "valid": padding = 0
      elif padding == "same":
        tot = [dl * (k - 1) for dl, k in zip(make_tuple(dilation, d), k_)]
        padding = flatten([(t // 2, t - t // 2) for t in reversed(tot)])
      else: raise ValueError(f"padding must be an int, a tuple, 'same' or 'valid', not {padding!r}")
    pads = self._resolve_pads(padding, d)
    out_dt = to_dtype(dtype) if dtype is not None else least_upper_dtype(self.dtype, weight.dtype)
    from tinycore import conv_layout
    if (m := conv_winograd.winograd_tile(self, weight, groups, make_tuple(stride, d), make_tuple(dilation, d), pads, dtype)):
      ret = conv_winograd.conv_winograd(self, weight, pads, m).cast(out_dt)
    elif conv_layout.wants_channels_last(self, weight, groups, make_tuple(stride, d), dtype):
      ret = conv_layout.conv_channels_last(self, weight, pads, make_tuple(stride, d), make_tuple(dilation, d), out_dt)
    else:
      x = self.pad(((0, 0), (0, 0), *pads)) if any(p != (0, 0) for p in pads) else self
      x = x._pool(k_, stride, dilation)                                  # (bs, cin, *o, *k)
      o_ = x.shape[2:2 + d]
      rc, cg = cout // groups, cin // groups
      x = x.reshape(bs, groups, cg, 1, *o_, *k_).expand(bs, groups, cg, rc, *o_, *k_)
      x = x.permute(0, 1, 3, *range(4, 4 + d), 2, *range(4 + d, 4 + 2 * d))    # (bs, g, rc, *o, cg, *k)
      w = weight.reshape(1, groups, rc, *[1] * d, cg, *k_)
      ret = (x * w).sum(tuple(range(3 + d, 4 + 2 * d)), dtype=dtype).reshape(bs, cout, *o_).cast(out_dt)
    if dtype is None and isinstance(self.device, str) and dtypes.is_float(self.dtype) and dtypes.is_float(weight.dtype) \
       and all(isinstance(s, int) for s in (*self.shape, *weight.shape)):   # (a symbolic shape keeps plain autograd)
      from tinycore import conv_backward   # its backward as convolutions, not autograd through the window view
      conv_backward.register(ret, self, weight, groups, make_tuple(stride, d), make_tuple(dilation, d), pads)
    return ret if bias is None else ret + bias.reshape(1, cout, *[1] * d)
  def conv1d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, dtype=None):
    if self.ndim != 3: raise ValueError(f"conv1d needs input (bs, cin, length), got {self.shape}")
    return self.conv2d(weight, bias, groups, stride, dilation, padding, dtype)
  def conv_transpose2d(self, weight, bias=None, groups: int = 1, stride=1, dilation=1, padding=0, output_padding=0):
    """Transposed conv: spread the input by `stride`, pad by dilation*(k-1) - padding, and convolve with the flipped, transposed weight."""
    if self.ndim < 3 or weight.ndim != self.ndim:
      raise ValueError(f"conv_transpose needs input (bs, cin, *spatial) and weight (cin, cout/groups, *kernel), got {self.shape} and {weight.shape}")
    k_ = tuple(weight.shape[2:]); d = len(k_)
    if self.shape[1] != weight.shape[0]: raise ValueError(f"conv_transpose input channels {self.shape[1]} != weight {weight.shape} dim 0")
    if weight.shape[0] % groups: raise ValueError(f"conv_transpose weight in-channels {weight.shape[0]} not divisible by groups {groups}")
    s_, dl_, op_ = make_tuple(stride, d), make_tuple(dilation, d), make_tuple(output_padding, d)
    pads = self._resolve_pads(padding, d)
    cin, cog = weight.shape[0], weight.shape[1]
    w = weight.reshape(groups, cin // groups, cog, *k_).transpose(1, 2).flip(tuple(range(3, 3 + d))).reshape(groups * cog, cin // groups, *k_)
    x = self
    for j, s in enumerate(s_):
      if s == 1: continue
      ax = 2 + j; n = x.shape[ax]
      x = x.unsqueeze(ax + 1).pad(tuple((0, 0) if i != ax + 1 else (0, s - 1) for i in range(x.ndim + 1)))
      x = x.flatten(ax, ax + 1)._slice_dim(ax, 0, (n - 1) * s + 1)
    cpad = [(dl * (k - 1) - pb, dl * (k - 1) - pa + op) for k, dl, (pb, pa), op in zip(k_, dl_, pads, op_)]
    x = x.pad(((0, 0), (0, 0), *cpad))
    return x.conv2d(w, bias, groups=groups, dilation=dilation)
  def _pool_args(self, kernel_size, stride, dilation, padding, d=2):
    k_ = make_tuple(kernel_size, d)
    s_ = k_ if stride is None else make_tuple(stride, d)
    if self.ndim < len(k_): raise ValueError(f"pooling a {len(k_)}-d window needs at least {len(k_)} dims, got shape {self.shape}")
    return k_, s_, make_tuple(dilation, len(k_)), self._resolve_pads(padding, len(k_))
  def _ceil_pads(self, k_, s_, dl_, pads, ceil_mode):
    if not ceil_mode: return pads
    out = []
    for i, k, s, dl, (pb, pa) in zip(self.shape[-len(k_):], k_, s_, dl_, pads):
      eff = i + pb + pa - dl * (k - 1) - 1
      o = math.ceil(eff / s) + 1
      if (o - 1) * s >= i + pb: o -= 1   # the last window must start inside the input or left padding
      out.append((pb, pa + max(0, (o - 1) * s - eff)))
    return out
  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, count_include_pad=True):
    k_, s_, dl_, pads = self._pool_args(kernel_size, stride, dilation, padding, 2 if not isinstance(kernel_size, (tuple, list)) else len(kernel_size))
    cpads = self._ceil_pads(k_, s_, dl_, pads, ceil_mode)
    pre = ((0, 0),) * (self.ndim - len(k_))
    axes = tuple(range(-len(k_), 0))
    x = self._float()
    s = x.pad(pre + tuple(cpads))._pool(k_, s_, dl_).sum(axes)
    # divisor: window elements inside the input (+ the explicit padding when count_include_pad), never the ceil_mode overhang
    ones = x.ones_like()
    if count_include_pad: cnt = ones.pad(pre + tuple(pads), value=1.0).pad(pre + tuple((0, c[1] - p[1]) for c, p in zip(cpads, pads)))
    else: cnt = ones.pad(pre + tuple(cpads))
    return s / cnt._pool(k_, s_, dl_).sum(axes)
  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, return_indices=False):
    k_, s_, dl_, pads = self._pool_args(kernel_size, stride, dilation, padding, 2 if not isinstance(kernel_size, (tuple, list)) else len(kernel_size))
    pads = self._ceil_pads(k_, s_, dl_, pads, ceil_mode)
    pre = ((0, 0),) * (self.ndim - len(k_))
    lo = dtypes.min(self.dtype)
    w = self.pad(pre + tuple(pads), value=lo)._pool(k_, s_, dl_)
    axes = tuple(range(-len(k_), 0))
    out = w.max(axes)
    if not return_indices: return out
    Tensor = tensor_type()
    sp = self.shape[-len(k_):]
    flat_idx = Tensor._index_range(prod(sp), self.device).reshape(sp).pad(tuple(pads), value=-1)._pool(k_, s_, dl_)
    nk = prod(k_)
    wf = w.reshape(*w.shape[:-len(k_)], nk)
    first = wf.argmax(-1, keepdim=True)
    idx = (first == Tensor._index_range(nk, self.device)).where(flat_idx.reshape(*flat_idx.shape[:-len(k_)], nk), 0).sum(-1)
    return out, idx.cast(dtypes.int32)
  def max_unpool2d(self, indices, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None):
    """The inverse of max_pool2d(return_indices=True): each value goes back to the input position its index names (flat
    over the trailing window dims), zeros elsewhere; any number of window dims."""
    Tensor = tensor_type()
    d = len(kernel_size) if isinstance(kernel_size, (tuple, list)) else 2
    k_, s_, dl_, pads = self._pool_args(kernel_size, stride, dilation, padding, d)
    if indices.shape != self.shape: raise ValueError(f"max_unpool2d: indices {indices.shape} must have the values' shape {self.shape}")
    sp = tuple((o - 1) * s - pb - pa + dl * (k - 1) + 1 for o, k, s, dl, (pb, pa) in zip(self.shape[-d:], k_, s_, dl_, pads))
    if output_size is not None: sp = tuple(output_size)[-d:]
    lead, n = self.shape[:-d], prod(sp)
    onehot = indices.reshape(*lead, -1, 1) == Tensor._index_range(n, self.device)   # pooled position x output position
    # overlapping windows can name one position twice (with the same value): take it once, not summed
    vals = onehot.where(self.reshape(*lead, -1, 1), dtypes.min(self.dtype)).max(-2)
    return onehot.any(-2).where(vals, 0).reshape(*lead, *sp).cast(self.dtype)
  def max_pool1d(self, kernel_size=2, stride=None, dilation=1, padding=0, ceil_mode=False):
    return self.max_pool2d((kernel_size,), None if stride is None else (stride,), dilation, padding, ceil_mode)
  def avg_pool1d(self, kernel_size=2, stride=None, dilation=1, padding=0, ceil_mode=False, count_include_pad=True):
    return self.avg_pool2d((kernel_size,), None if stride is None else (stride,), dilation, padding, ceil_mode, count_include_pad)

  def interpolate(self, size, mode: str = "linear", align_corners: bool = False):
    """Resize the trailing len(size) dims: 'nearest' (torch's floor rule), 'nearest-exact', or '(bi/tri)linear'."""
    Tensor = tensor_type()
    size = make_tuple(size, 1)
    if len(size) > self.ndim: raise ValueError(f"interpolate size {size} has more dims than the input {self.shape}")
    if mode not in ("linear", "nearest", "nearest-exact", "bilinear", "trilinear"): raise ValueError(f"unsupported interpolate mode {mode!r}")
    if align_corners and mode.startswith("nearest"): raise ValueError("align_corners only applies to the linear modes")
    if self.dtype == dtypes.uint8 and not mode.startswith("nearest") and not align_corners:
      x = self
      for j in reversed(range(len(size))): x = x._uint8_linear_axis(self.ndim - len(size) + j, size[j])
      return x
    x = self
    for j, out in enumerate(size):
      ax = self.ndim - len(size) + j
      n = x.shape[ax]
      if out == n: continue
      o = Tensor._index_range(out, self.device).cast(dtypes.float32)
      if mode == "nearest": src = (o * (n / out)).floor().cast(dtypes.int32).minimum(n - 1); x = x._take(ax, src); continue
      if mode == "nearest-exact": src = ((o + 0.5) * (n / out)).floor().cast(dtypes.int32).minimum(n - 1); x = x._take(ax, src); continue
      pos = (o * ((n - 1) / (out - 1) if out > 1 else 0.0)) if align_corners else ((o + 0.5) * (n / out) - 0.5).maximum(0.0)
      i0 = pos.floor().cast(dtypes.int32).minimum(n - 1)
      i1 = (i0 + 1).minimum(n - 1)
      wgt = (pos - i0.cast(dtypes.float32)).reshape(out, *[1] * (x.ndim - ax - 1))
      xf = x._float()
      x = xf._take(ax, i0) * (1 - wgt) + xf._take(ax, i1) * wgt
    return x.cast(self.dtype) if dtypes.is_float(self.dtype) else x.round().cast(self.dtype)
  def _uint8_linear_axis(self, ax: int, out: int) -> Tensor:
    """One axis of linear resizing of uint8 the way torch computes it (bit-exact): per-output taps and weights, the
    weights in fixed point with as many fraction bits as int16 allows, rounded and clamped back to uint8 after each axis."""
    Tensor = tensor_type()
    n = self.shape[ax]
    if out == n: return self
    scale, taps = n / out, []
    for i in range(out):
      center = scale * (i + 0.5)
      lo, hi = max(int(center - 0.5), 0), min(int(center + 1.5), n)
      ws = [max(0.0, 1 - abs(k + lo - center + 0.5)) for k in range(hi - lo)]
      tot = sum(ws)
      taps.append((lo, [w / tot for w in ws] if tot else ws))
    maxw = max(max(ws, default=0.0) for _, ws in taps)
    p = 0
    while p < 22 and int(0.5 + maxw * (1 << (p + 1))) < (1 << 15): p += 1
    acc = None
    trail = [1] * (self.ndim - ax - 1)
    for k in range(max(len(ws) for _, ws in taps)):
      idx = Tensor([min(lo + k, n - 1) for lo, _ in taps], dtype=dtypes.int32, device=self.device)
      wq = Tensor([int(ws[k] * (1 << p) + 0.5) if k < len(ws) else 0 for _, ws in taps], dtype=dtypes.int32, device=self.device)
      term = self._take(ax, idx).cast(dtypes.int32) * wq.reshape(out, *trail)
      acc = term if acc is None else acc + term
    return ((acc + (1 << (p - 1))) >> p).clip(0, 255).cast(dtypes.uint8)
  def _take(self, ax: int, idx):
    """x indexed along `ax` by a 1-d int tensor (one-hot and a sum)."""
    return self[(slice(None),) * ax + (idx,)]

  # ---- losses
  def binary_crossentropy(self, Y, reduction: str = "mean"):
    return _reduction(-(Y * self.log().maximum(-100.0) + (1 - Y) * (1 - self).log().maximum(-100.0)), reduction)
  def binary_crossentropy_logits(self, Y, reduction: str = "mean", pos_weight=None):
    log_w = 1 if pos_weight is None else 1 + (pos_weight - 1) * Y
    return _reduction((1 - Y) * self + log_w * (-self).softplus(), reduction)
  def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean"):
    """Class indices Y over the last axis of logits self."""
    Tensor = tensor_type()
    if Y.shape != self.shape[:-1]: raise ValueError(f"labels of shape {Y.shape} don't match logits {self.shape} (expected {self.shape[:-1]})")
    if not dtypes.is_int(Y.dtype): raise TypeError(f"labels must be integers, got {Y.dtype}")
    c = self.shape[-1]
    _check_labels(Y, c, ignore_index, "sparse_categorical_crossentropy")
    logp = self.log_softmax(-1)
    valid = Y != ignore_index
    oh = Y.unsqueeze(-1) == Tensor._index_range(c, self.device)
    nll = -oh.where(logp, 0).sum(-1)
    smooth = -logp.mean(-1)
    loss = valid.where((1 - label_smoothing) * nll + label_smoothing * smooth, 0)
    if reduction == "mean": return loss.sum() / valid.sum().maximum(1)
    return _reduction(loss, reduction)
  def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0):
    """torch layout: logits (N, C, ...) or (C,); Y class indices (N, ...) or probabilities shaped like the logits."""
    Tensor = tensor_type()
    cd = 1 if self.ndim > 1 else 0
    c = self.shape[cd]
    if Y.ndim == self.ndim - 1:
      if not dtypes.is_int(Y.dtype): raise TypeError(f"class-index targets must be integers, got {Y.dtype}")
      if Y.shape != self.shape[:cd] + self.shape[cd + 1:]: raise ValueError(f"target shape {Y.shape} doesn't match logits {self.shape}")
      _check_labels(Y, c, None, "cross_entropy")
      Y = (Y.unsqueeze(cd) == Tensor._index_range(c, self.device).reshape(c, *[1] * (self.ndim - cd - 1))).cast(least_upper_float(self.dtype))
    elif Y.shape != self.shape: raise TargetShapeError(f"probability targets of shape {Y.shape} must match logits {self.shape}")
    Y = (1 - label_smoothing) * Y + label_smoothing / c
    return _reduction(-(self.log_softmax(cd) * Y).sum(cd), reduction)
  def nll_loss(self, Y, weight=None, ignore_index=None, reduction: str = "mean"):
    """torch layout: log-probabilities (N, C, ...) or (C,), Y class indices."""
    Tensor = tensor_type()
    cd = 1 if self.ndim > 1 else 0
    c = self.shape[cd]
    if Y.shape != self.shape[:cd] + self.shape[cd + 1:]: raise ValueError(f"target shape {Y.shape} doesn't match input {self.shape}")
    if not dtypes.is_int(Y.dtype): raise TypeError(f"nll_loss targets must be integers, got {Y.dtype}")
    _check_labels(Y, c, ignore_index, "nll_loss")
    oh = Y.unsqueeze(cd) == Tensor._index_range(c, self.device).reshape(c, *[1] * (self.ndim - cd - 1))
    if ignore_index is not None: oh = oh & (Y != ignore_index).unsqueeze(cd)
    w = oh.where(weight.reshape(c, *[1] * (self.ndim - cd - 1)) if weight is not None else 1.0, 0.0)
    loss = -(w * self).sum(cd)
    if reduction == "mean": return loss.sum() / w.sum()
    return _reduction(loss, reduction)
