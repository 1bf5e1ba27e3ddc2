"""A convolution as an implicit GEMM with the output channels as the vector axis and the input channels innermost in
the reduce, for renderers with a register-blocked microkernel (Renderer.register_block).

Plain NCHW convolution vectorizes along the output width: 56-wide rows take 8-float vectors (half an AVX-512 register,
half the FMA throughput), and with stride s > 1 no output axis is unit-stride in any load, so it ran one scalar
accumulator per output (16x64x56x56 -> 128, 3x3 stride 2: 4.3 s against torch's 0.14 s). Here:
  input   padded once into (bs, *in, cin) (the padding copy happens anyway; this one also moves the channels innermost)
  weight  copied into panels (cout/32, *k, cin, 32) (through (cout/32, cin, *k, 32): a transpose read in row order),
          or (*k, cin, cout) under 4 panels: each panel one contiguous stream, one vector load per 16 output channels
  reduce  over (*k, cin) with cin innermost, so the loop that runs longest streams both operands contiguously: the
          microkernel's rows are output pixels (a broadcast input element each), its columns output channels; with
          (cin, *k) order the 3-tap inner loop let the C compiler reuse loaded scalars across taps and broadcast them
          register to register, on the port the 512-bit FMAs use (one core: 116 against 148 GFLOP/s, 16x64x56x56 3x3)
  output  written as (bs, cout, *out) directly, each vector's 16 channels stored lane by lane (opt.py `VEC_S`), 8 pixel
          rows of a lane as one vector (codegen/lane_stores.py, transposed with shuffles by the C renderer), instead
          of a channels-last result and a transposing copy the size of the output (~5 ms of 35 on one core)"""
from __future__ import annotations
from typing import TYPE_CHECKING
if TYPE_CHECKING: from tinycore.tensor import Tensor

def wants_channels_last(x: Tensor, weight: Tensor, groups: int, stride: tuple[int, ...], dtype) -> bool:
  """Only where the microkernel takes it: a renderer declaring a register block, one group, and output channels that fill
  whole 16-float vectors; not a 1x1 stride-1 conv, a plain matmul over NCHW's contiguous pixels (16x64x56x56 -> 256 on
  one core: 23 ms that way, 30 ms with the channels-last copy of the input)."""
  if dtype is not None or groups != 1 or not isinstance(x.device, str): return False
  if not all(isinstance(s, int) for s in (*x.shape, *weight.shape)) or weight.shape[0] % 16: return False
  if all(k == 1 for k in weight.shape[2:]) and all(s == 1 for s in stride): return False
  from tinycore.device import Device
  return Device[x.device].renderer.register_block is not None

def _panel(cout: int) -> int:
  """Output channels per weight panel: the register block's 32 columns where they make at least 4 panels (codegen/split.py
  splits the channel axis into panel and column ranges only then), else all of them in one."""
  return 32 if cout % 32 == 0 and cout // 32 >= 4 else cout

def conv_channels_last(x: Tensor, weight: Tensor, pads: list[tuple[int, int]], stride: tuple[int, ...],
                       dilation: tuple[int, ...], out_dtype) -> Tensor:
  """x (bs, cin, *in), weight (cout, cin, *k) -> (bs, cout, *out)."""
  d = weight.ndim - 2
  bs, cin, k_, cout = x.shape[0], x.shape[1], tuple(weight.shape[2:]), weight.shape[0]
  xl = x.pad(((0, 0), (0, 0), *pads)).permute(0, *range(2, 2 + d), 1).contiguous()    # (bs, *padded, cin)
  windows = xl.permute(0, 1 + d, *range(1, 1 + d))._pool(k_, stride, dilation)      # (bs, cin, *out, *k): a view of xl
  o_ = tuple(windows.shape[2:2 + d])
  xv = windows.permute(0, *range(2, 2 + d), *range(2 + d, 2 + 2 * d), 1).reshape(bs, *o_, 1, *k_, cin)
  # (cout/P, *k, cin, P): each panel of P output channels one contiguous stream, as the kernel reads it
  P = _panel(int(cout))   # concrete: wants_channels_last checked
  wl = weight.reshape(cout // P, P, cin, *k_).permute(0, 2, *range(3, 3 + d), 1).contiguous()   # (cout/P, cin, *k, P)
  wl = wl.permute(0, *range(2, 2 + d), 1, 2 + d).contiguous()                                 # (cout/P, *k, cin, P)
  wv = wl.permute(0, 2 + d, *range(1, 2 + d)).reshape(*[1] * (1 + d), cout, *k_, cin)
  out = (xv * wv).sum(tuple(range(2 + d, 3 + 2 * d))).cast(out_dtype)                # (bs, *out, cout)
  return out.permute(0, 1 + d, *range(1, 1 + d))
