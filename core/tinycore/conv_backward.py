"""A convolution's backward as convolutions and GEMM-shaped reduces, registered on its output node
(gradient.custom_gradient) in place of autograd through the sliding-window view.

Autograd through `_pool` (pad, repeat, reshape, shrink) gives the input gradient as a reduce over the scattered
windows with index math the optimizer can't tile, and the weight gradient with the output channels on a strided axis:
on the bench's 16x64x56x56 3x3 conv the two kernels ran at 2-3 GFLOP/s. Here:
  input grad   the transposed convolution: the output gradient spread by the stride, padded by the kernel extent
               less the forward padding, convolved with the flipped, transposed weight; a forward convolution, so it
               takes the forward's register-blocked kernel (and its own backward, for double backward)
  weight grad  per group, sum over batch and output positions of x's window (a scalar per kernel tap and input
               channel) times the output gradient with its channels innermost (a contiguous vector): an implicit GEMM
               whose vector axis is the output channel, which the heuristic's register block takes like a matmul."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinycore.dtype import dtypes
if TYPE_CHECKING: from tinycore.tensor import Tensor

_HALF = (dtypes.float16, dtypes.bfloat16)

def _pad_or_shrink(t: Tensor, pairs: list[tuple[int, int]]) -> Tensor:
  """Spatial (before, after) padding where an amount may be negative (cut instead): a forward padding larger than the
  kernel's extent leaves input rows no window saw."""
  pre = ((0, 0),) * (t.ndim - len(pairs))
  if any(b > 0 or a > 0 for b, a in pairs): t = t.pad(pre + tuple((max(b, 0), max(a, 0)) for b, a in pairs))
  if any(b < 0 or a < 0 for b, a in pairs):
    t = t.shrink(tuple((0, s) for s in t.shape[:len(pre)]) +
                 tuple((max(-b, 0), s - max(-a, 0)) for (b, a), s in zip(pairs, t.shape[len(pre):])))
  return t

def conv_input_grad(g: Tensor, w: Tensor, in_spatial: tuple[int, ...], groups: int, stride: tuple[int, ...],
                    dilation: tuple[int, ...], pads: list[tuple[int, int]]) -> Tensor:
  """d conv / d input: g (bs, cout, *out) -> (bs, cin, *in_spatial)."""
  d = len(in_spatial)
  k_ = tuple(w.shape[2:])
  cout, cg = w.shape[0], w.shape[1]
  rc = cout // groups
  # per group, in and out channels swap and the taps reverse
  # (contiguous: a weight read through the flip and transpose changes what the optimizer sees in the conv kernel)
  wt = w.reshape(groups, rc, cg, *k_).transpose(1, 2).flip(tuple(range(3, 3 + d))).reshape(groups * cg, rc, *k_).contiguous()
  x = g
  for j, s in enumerate(stride):
    if s == 1: continue
    ax, n = 2 + j, x.shape[2 + j]
    # s-1 zeros after every element, the trailing ones cut: length (n-1)*s + 1
    x = x.unsqueeze(ax + 1).pad(tuple((0, s - 1) if i == ax + 1 else (0, 0) for i in range(x.ndim + 1)))
    x = x.flatten(ax, ax + 1)
    x = x.shrink(tuple((0, (n - 1) * s + 1) if i == ax else (0, sz) for i, sz in enumerate(x.shape)))
  pairs = []
  for size, k, dl, (pb, _), L in zip(in_spatial, k_, dilation, pads, x.shape[2:]):
    ext = dl * (k - 1)
    before = ext - pb
    pairs.append((before, size + ext - L - before))   # padded length size + ext: a stride-1 window of extent ext+1 gives size
  from tinycore import conv_layout
  if all(b >= 0 and a >= 0 for b, a in pairs) and conv_layout.wants_channels_last(x, wt, groups, (1,) * d, None):
    # the channels-last conv copies its input into a padded layout anyway: the padding goes there, not in a copy before
    return x.conv2d(wt, groups=groups, dilation=dilation, padding=[p for pair in reversed(pairs) for p in pair])
  # padded in memory, once: read through the window with the padding masked in, the conv kernel can't use vector loads
  # (the scheduler pads a buffer's view itself, but g is usually an expression: 2 s -> 0.1 s loaded, 16x64x56x56)
  xp = _pad_or_shrink(x, pairs)
  if xp is not g: xp = xp.contiguous()
  return xp.conv2d(wt, groups=groups, dilation=dilation)

def conv_weight_grad(g: Tensor, x: Tensor, w_shape: tuple[int, ...], groups: int, stride: tuple[int, ...],
                     dilation: tuple[int, ...], pads: list[tuple[int, int]]) -> Tensor:
  """d conv / d weight: g (bs, cout, *out), x (bs, cin, *in) -> (cout, cin/groups, *kernel)."""
  cout, cg, k_ = w_shape[0], w_shape[1], tuple(w_shape[2:])
  d, bs, rc = len(k_), int(x.shape[0]), cout // groups   # int: register() takes concrete shapes only
  xp = _pad_or_shrink(x, pads)._pool(k_, stride, dilation)        # (bs, cin, *out, *k)
  o_ = tuple(xp.shape[2:2 + d])
  # the output gradient with its channels innermost: the vector axis of the reduce below reads it contiguously
  gt = g.reshape(bs, groups, rc, *o_).permute(0, *range(3, 3 + d), 1, 2)                 # (bs, *out, G, rc)
  if rc > 1: gt = gt.contiguous()
  xv = xp.reshape(bs, groups, cg, *o_, *k_).permute(0, *range(3, 3 + d), 1, 2, *range(3 + d, 3 + 2 * d))
  prod = xv.unsqueeze(-1) * gt.reshape(bs, *o_, groups, 1, *[1] * d, rc)                 # (bs, *out, G, cg, *k, rc)
  acc = dtypes.float32 if g.dtype in _HALF or x.dtype in _HALF else None
  if bs > 1:
    # one partial sum per sample first: the reduce over a sample's positions keeps its slices of x and g in L2 while
    # every (channel, tap) tile of the output passes over them; one reduce over all samples streams g from memory once
    # per tile (16x64x56x56 3x3: 180 -> 69 ms, loaded machine). The partials (bs x the weight's size) are summed after.
    dw = prod.sum(tuple(range(1, 1 + d)), dtype=acc).contiguous().sum(0, dtype=acc)    # (G, cg, *k, rc)
  else: dw = prod.sum(tuple(range(1 + d)), dtype=acc)
  # written in that order (a vector store per tap), then moved to (cout, cg, *k): a copy the size of the weight
  if rc > 1: dw = dw.contiguous()
  return dw.permute(0, 2 + d, 1, *range(2, 2 + d)).reshape(cout, cg, *k_)

def register(out: Tensor, x: Tensor, w: Tensor, groups: int, stride: tuple[int, ...], dilation: tuple[int, ...],
             pads: list[tuple[int, int]]) -> None:
  """Make `out` = conv(x, w) (before any bias) differentiate through the two functions above."""
  from tinycore.gradient import custom_gradient
  tensor = type(out)
  in_spatial = tuple(int(s) for s in x.shape[2:])   # concrete: the caller checks
  w_shape = tuple(int(s) for s in w.shape)
  # the forward's values, as autograd would see them (not whatever the Tensors hold by the time backward runs)
  xu, wu = x.uop, w.uop
  def backward(ctx, wanted: tuple[bool, bool]):
    g, xt, wt = tensor(ctx), tensor(xu), tensor(wu)
    gx = conv_input_grad(g, wt, in_spatial, groups, stride, dilation, pads).cast(xu.dtype).uop if wanted[0] else None
    gw = conv_weight_grad(g, xt, w_shape, groups, stride, dilation, pads).cast(wu.dtype).uop if wanted[1] else None
    return gx, gw
  custom_gradient(out.uop, (xu, wu), backward)
