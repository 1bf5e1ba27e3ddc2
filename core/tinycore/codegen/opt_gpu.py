"""GPU kernel optimizations (renderers with thread indices), run by opt.optimize before the launch grid exists.

1. Register tile: a reduce kernel's thread computes TMxTN outputs (4x8 by default: on an H200, fp32 4096^3 ran
   5.8 TFLOP/s untiled, 10.6 at 2x2, 13.8 at 4x4, 17.8 at 8x4, 22.7 at 4x8, 15.4 at 8x8) instead of one (UPCAST of two output axes). The copies
   share every load that doesn't depend on the upcast axis (hash-consing), so a matmul thread does TM+TN loads per k
   for TM*TN FMAs instead of 2 loads per FMA. The x axis (threads' neighbour axis) is split *strided*
   (n = u*N/TN + n'), so a warp's loads and stores of each copy stay coalesced; the other axis is split contiguous.
2. Workgroup shape: with two or more output dims the threads form a 16x16 square (a block reuses a 16-row panel of
   one operand and a 16-column panel of the other from L1), not 256x1.
3. Tensor cores: a half matmul is tiled through shared memory (opt_smem.py: block tiles, pipelined copies, warp tiles),
   or where its operands don't allow that, becomes WMMAs fed straight from global memory (opt_tc.py).
The tile is the renderer's `register_tile` (default 4x8); `GPU_TILE=TM,TN` overrides it (`GPU_TILE=1,1` turns it off);
`NOGPUOPT=1` skips all of it; `TC=0` skips tensor cores."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.helpers import ContextVar, prod
from tinycore.renderer import Renderer
from tinycore.codegen.opt import _bound, _globals, _loads, upcast_global, _simplify

GPU_TILE, NOGPUOPT = ContextVar("GPU_TILE", ""), ContextVar("NOGPUOPT", 0)   # GPU_TILE "": the renderer's register_tile

def upcast_strided(k: UOp, r: UOp, amt: int) -> UOp:
  """Like opt.upcast_global, but copy u covers r = u*(bound/amt) + r': neighbouring threads stay on neighbouring
  elements, so each copy's accesses along r coalesce across a warp (GPUs without vector loads want this)."""
  step = _bound(r) // amt
  nr = UOp(Ops.RANGE, dtypes.index, (index_const(step),), r.arg)
  stores = [st.substitute({r: nr + u * step}) for st in k.src for u in range(amt)]
  return _simplify(k.replace(src=tuple(stores)))

def _indep(k: UOp, r: UOp) -> int:
  """How many loads don't depend on `r`: that many loads each copy of an upcast on `r` shares."""
  return sum(r not in ind.toposort() for ind in _loads(k))

def _tile_plan(k: UOp) -> tuple[UOp | None, UOp | None]:
  """(x axis, y axis) to tile: only single-REDUCE kernels with a reduce loop, axes with a constant bound that some load
  doesn't depend on. x is the innermost output axis (launch dim 0)."""
  topo = k.toposort()
  if sum(u.op is Ops.REDUCE for u in topo) != 1 or not any(u.op is Ops.RANGE and u.arg[0] == "r" for u in topo): return None, None
  glob = [g for g in _globals(k) if _bound(g)]
  if not glob: return None, None
  x = glob[-1] if _indep(k, glob[-1]) else None
  ys = sorted((g for g in glob[:-1] if _indep(k, g)), key=lambda g: -_indep(k, g))   # most shared loads first
  return x, (ys[0] if ys else None)

def _amt(r: UOp | None, want: int) -> int:
  # largest power of two <= want that divides the bound and leaves >= 4 threads along the axis
  a = want
  while a > 1 and (r is None or _bound(r) % a or _bound(r) // a < 4): a //= 2
  return a if r is not None else 1

def register_tile(k: UOp, tm: int = 4, tn: int = 4) -> tuple[UOp, tuple[int, int]]:
  """Returns the tiled kernel and the (TM, TN) it used."""
  x, y = _tile_plan(k)
  ax, ay = _amt(x, tn), _amt(y, tm)
  if ax > 1: k = upcast_strided(k, x, ax)
  if ay > 1: k = upcast_global(k, next(g for g in _globals(k) if g.arg == y.arg), ay)
  return k, (ay, ax)

def local_sizes(k: UOp, renderer: Renderer, threads: int = 256) -> tuple[int, ...] | None:
  """Workgroup shape per launch dim (x, y, z) for the output loops of `k`; None keeps gpudims' default (1-D)."""
  glob = _globals(k)
  if len(glob) < 2 or not any(u.op is Ops.REDUCE for u in k.toposort()): return None   # elementwise: 256x1 coalesces best
  lmax = tuple(renderer.local_max or (threads,)) + (1, 1, 1)
  threads = min(threads, prod(lmax[:2]))
  bx, by = _bound(glob[-1]) or threads, _bound(glob[-2]) or 1
  lx = 1
  while lx * 2 <= min(16, bx, lmax[0]): lx *= 2
  ly = 1
  while ly * 2 <= min(threads // lx, by, lmax[1]): ly *= 2
  if lx * ly < threads and lx < bx: lx = min(threads // ly, bx, lmax[0])   # a thin y: give the rest back to x
  return (lx, ly)

def optimize_gpu(k: UOp, renderer: Renderer) -> UOp:
  from tinycore.codegen.gpudims import to_gpu_dims
  from tinycore.codegen.opt_tc import tensor_core
  if NOGPUOPT: return k
  from tinycore.codegen.opt_smem import smem_gemm
  from tinycore.codegen.opt_simt import simt_gemm
  # tensor-core matmuls: staged through shared memory where the operands allow it (opt_smem.py), else fragments from global;
  # fp32 matmuls without tensor cores: staged FMA tiles (opt_simt.py) where the renderer opts in
  if (tc := smem_gemm(k, renderer)) is not None or (tc := tensor_core(k, renderer)) is not None: return tc
  if (tc := simt_gemm(k, renderer)) is not None: return tc
  # TM rows (y axis) x TN columns (x axis)
  tm, tn = (int(v) for v in str(GPU_TILE.value).split(",")) if GPU_TILE.value else renderer.register_tile
  k, _ = register_tile(k, tm, tn)
  ls = local_sizes(k, renderer)
  if ls is None: return k   # 1-D or no outputs: gpudims' default
  return to_gpu_dims(k, (renderer.local_max or (256,))[0], ls)
