"""A 3x3 stride-1 convolution by Winograd's minimal filtering F(m, 3) (Lavin & Gray 2015), for renderers that ask for it
(`Renderer.winograd_tile`): each m x m block of output comes from an (m+2) x (m+2) tile of input, with (m+2)^2
multiplies per channel pair instead of 9 m^2 (F(2,3): 2.25x fewer, F(4,3): 4x). The kernels:
  input    padded once into (bs, rows, cols, cin) (a copy the direct path makes too), then each tile's B^T d B:
           (a*a, tiles, cin), a = m+2, one plane per transform point, channels innermost
  weight   copied to (3, 3, cin, cout), then G g G^T: (a*a, cin, cout); recomputed every call (not cached), so a weight
           that changes every step, in place or not, stays right
  GEMM     one [tiles x cin] @ [cin x cout] per transform point: a batched matmul on the register-blocked microkernel
  output   A^T M A per tile, written straight into (bs, cout, th, m, tw, m) = NCHW, 8 columns a vector store (the rows
           and columns past the output, where the tiles overhang it, are cut by a view)
The transforms are sums of shifted views with constant coefficients (zeros skipped), stacked along the point axis;
codegen unrolls such a stacked axis whole (codegen/opt_elementwise.py `_stacked_axes`) so each point's gates fold away.
Accuracy against float64, unit-variance inputs, weights scaled 1/sqrt(9 cin), error relative to the output's largest
value: F(2,3) 3e-7..1e-6 (below the direct conv's ~2e-6); F(4,3), whose matrices reach 8 (A^T) and 1/24 (G), 6.5e-6
at 64 channels, 1.4e-5 at 256, 1.8e-5 at 512 (~8e-7 sqrt(cin)); torch's oneDNN conv ~3e-7."""
from __future__ import annotations
from typing import TYPE_CHECKING
from tinycore.dtype import dtypes
from tinycore.helpers import ContextVar
if TYPE_CHECKING: from tinycore.tensor import Tensor

# (B^T, G, A^T) for output tile m: the Toom-Cook points 0, +-1, (F(4,3)) +-2, and infinity
_F2 = ([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
       [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]],
       [[1, 1, 1, 0], [0, 1, -1, -1]])
_F4 = ([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0],
        [0, 4, 0, -5, 0, 1]],
       [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6],
        [0, 0, 1]],
       [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]])
MATRICES: dict[int, tuple] = {2: _F2, 4: _F4}
# WINOGRAD=0 (direct), 2 or 4: every eligible conv takes that path instead of the renderer's choice (-1)
WINOGRAD = ContextVar("WINOGRAD", -1)

def winograd_tile(x: Tensor, weight: Tensor, groups: int, stride: tuple[int, ...], dilation: tuple[int, ...],
                  pads: list[tuple[int, int]], dtype) -> int:
  """The output tile m (2 or 4) to compute this conv with, or 0 for the direct path. Only 2-d 3x3 stride-1 undilated
  ungrouped float32 convs with concrete shapes and nonnegative padding qualify; among those the renderer decides
  (`winograd_tile(bs, cin, cout, out_h, out_w)`), and WINOGRAD=0/2/4 overrides it (for measuring the crossover)."""
  if dtype is not None or groups != 1 or not isinstance(x.device, str) or x.ndim != 4: return 0
  if x.dtype != dtypes.float32 or weight.dtype != dtypes.float32: return 0
  if not all(isinstance(s, int) for s in (*x.shape, *weight.shape)): return 0
  if tuple(weight.shape[2:]) != (3, 3) or any(s != 1 for s in stride) or any(d != 1 for d in dilation): return 0
  if any(p < 0 for pair in pads for p in pair): return 0
  oh, ow = x.shape[2] + sum(pads[0]) - 2, x.shape[3] + sum(pads[1]) - 2
  if oh < 1 or ow < 1: return 0
  if (forced := int(WINOGRAD)) >= 0: return forced if forced in MATRICES else 0
  from tinycore.device import Device
  m = Device[x.device].renderer.winograd_tile(x.shape[0], x.shape[1], weight.shape[0], oh, ow)
  return m if m in MATRICES else 0

def _combine(coefs: list, terms: list[Tensor]) -> Tensor:
  """sum(c * t), skipping zero coefficients and multiplies by +-1 (every row of the matrices above has a nonzero)."""
  out: Tensor | None = None
  for c, t in zip(coefs, terms):
    if c == 0: continue
    e = t if c == 1 else -t if c == -1 else t * c
    out = e if out is None else out + e
  if out is None: raise ValueError("winograd: a transform row of zeros")
  return out

def weight_transform(weight: Tensor, m: int) -> Tensor:
  """(cout, cin, 3, 3) -> U = G g G^T as (a*a, cin, cout)."""
  _, G, _ = MATRICES[m]
  a = m + 2
  # taps moved outermost and output channels innermost first (a copy the size of the weight): the transform's loads
  # are then contiguous along its vector axis (read through the (cout, cin, 3, 3) layout, each lane was 9 cin apart:
  # 256 channels, 25 ms against 0.7 for the input transform, loaded machine)
  wt = weight.permute(2, 3, 1, 0).contiguous()                                          # (3, 3, cin, cout)
  taps = [wt[k, l] for k in range(3) for l in range(3)]                                  # each (cin, cout)
  pts = [_combine([G[i][k] * G[j][l] for k in range(3) for l in range(3)], taps) for i in range(a) for j in range(a)]
  return type(weight).stack(*pts, dim=0).contiguous()

def conv_winograd(x: Tensor, weight: Tensor, pads: list[tuple[int, int]], m: int) -> Tensor:
  """x (bs, cin, h, w) float32, weight (cout, cin, 3, 3), stride 1 -> (bs, cout, out_h, out_w)."""
  BT, _, AT = MATRICES[m]
  a = m + 2
  stack = type(x).stack
  bs, cin, h, w = (int(s) for s in x.shape)
  cout = int(weight.shape[0])
  (pt, pb), (pl, pr) = pads
  oh, ow = h + pt + pb - 2, w + pl + pr - 2
  th, tw = -(-oh // m), -(-ow // m)
  # rows/cols m*(t+1) + 2: the tiles' m*t + 2 and one more tile step, so every point's strided view below is whole
  hp, wp = m * (th + 1) + 2, m * (tw + 1) + 2
  xp = x.pad(((0, 0), (0, 0), (pt, hp - h - pt), (pl, wp - w - pl))).permute(0, 2, 3, 1).contiguous()
  def point(k: int, l: int) -> Tensor:   # element (k, l) of every tile: (bs*th*tw, cin)
    v = xp.shrink(((0, bs), (k, k + m * th), (l, l + m * tw), (0, cin))).reshape(bs, th, m, tw, m, cin)
    return v.shrink(((0, bs), (0, th), (0, 1), (0, tw), (0, 1), (0, cin))).reshape(bs * th * tw, cin)
  # both transforms separably, rows then columns: the row sums are shared nodes of the graph, so the unrolled kernel
  # computes each once (F(4,3)'s input: 264 adds per tile and channel instead of 484)
  d = [[point(k, l) for l in range(a)] for k in range(a)]
  r = [[_combine(BT[i], [d[k][l] for k in range(a)]) for l in range(a)] for i in range(a)]
  V = stack(*[_combine(BT[j], r[i]) for i in range(a) for j in range(a)], dim=0).contiguous()   # (a*a, tiles, cin)
  M = (V @ weight_transform(weight, m)).contiguous().reshape(a * a, bs, th, tw, cout)
  mp = [[M[i * a + j].permute(0, 3, 1, 2) for j in range(a)] for i in range(a)]            # (bs, cout, th, tw)
  t = [[_combine(AT[p], [mp[i][j] for i in range(a)]) for j in range(a)] for p in range(m)]
  rows = [stack(*[_combine(AT[q], t[p]) for q in range(m)], dim=4) for p in range(m)]   # (bs, cout, th, tw, m_q)
  Y = stack(*rows, dim=3).contiguous().reshape(bs, cout, th * m, tw * m)             # (bs, cout, th, m_p, tw, m_q)
  return Y if (th * m, tw * m) == (oh, ow) else Y.shrink(((0, bs), (0, cout), (0, oh), (0, ow)))
