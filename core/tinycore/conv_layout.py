"""A strided convolution with the output channels innermost, for renderers with a register-blocked microkernel.

With stride s > 1 along the last spatial dim, neighbouring outputs read inputs s apart: no output axis is unit-stride in
any load, so the optimizer finds no vector axis and the conv runs one scalar accumulator per output (16x64x56x56 ->
128, 3x3 stride 2: 4.3 s against torch's 0.14 s, loaded). Here the weight is copied once to (cin, *kernel, cout)
and the reduce's output is (bs, *out, cout): the output channel is then the unit-stride axis of the weight loads, the
input window is the broadcast operand, and the microkernel tiles rows of output positions by columns of channels like a
matmul. The result is moved back to (bs, cout, *out) by one copy the size of the output."""
from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING: from tinycore.tensor import Tensor

def wants_channels_last(x: Tensor, weight: Tensor, groups: int, stride: tuple[int, ...], dtype) -> bool:
  """Only where it pays and the microkernel takes it: a renderer declaring a register block (Renderer.register_block),
  a strided last spatial dim, one group, and output channels that fill whole 16-float vectors."""
  if dtype is not None or groups != 1 or stride[-1] == 1 or not isinstance(x.device, str): return False
  if not all(isinstance(s, int) for s in (*x.shape, *weight.shape)) or weight.shape[0] % 16: return False
  from tinycore.device import Device
  return Device[x.device].renderer.register_block is not None

def conv_channels_last(windows: Tensor, weight: Tensor, out_dtype) -> Tensor:
  """windows: the padded input's sliding windows (bs, cin, *out, *k); weight (cout, cin, *k) -> (bs, cout, *out)."""
  d = weight.ndim - 2
  bs, cin, o_, k_ = windows.shape[0], windows.shape[1], tuple(windows.shape[2:2 + d]), tuple(weight.shape[2:])
  cout = weight.shape[0]
  xv = windows.permute(0, *range(2, 2 + d), 1, *range(2 + d, 2 + 2 * d)).reshape(bs, *o_, 1, cin, *k_)
  wp = weight.permute(*range(1, 2 + d), 0).contiguous()          # (cin, *k, cout): output channels contiguous
  wv = wp.permute(1 + d, *range(1 + d)).reshape(*[1] * (1 + d), cout, cin, *k_)
  out = (xv * wv).sum(tuple(range(2 + d, 3 + 2 * d))).cast(out_dtype)   # (bs, *out, cout)
  return out.contiguous().permute(0, 1 + d, *range(1, 1 + d))
