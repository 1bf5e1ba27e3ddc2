"""Tensor cores: a kernel whose one REDUCE is a sum over k of (half A[m,k]) * (half B[k,n]) becomes warp-wide WMMA UOps
(mma.sync m16n8k16: D[16,8] = A[16,16] @ B[16,8] + C, fp32 accumulate) for renderers that declare that tensor core.

Each warp computes WM x WN mma tiles (16*WM rows, 8*WN columns): per k step of 16 it loads its lanes' A and B fragments
(shared between the tiles of a row/column by hash-consing), issues WM*WN WMMAs and adds each result's 4 elements into
4 scalar accumulators (one REDUCE each, all sharing the k loop). Which matrix element a lane holds is the PTX layout
below; the emulator's `mma_m16n8k16()` table is the reference the tests check it against.
Launch: dim 0 = lane + 32 * (column tile), dim 1 = row tile, any other output axes stay grid dims (gpudims)."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.helpers import ContextVar
from tinycore.codegen.opt import _bound, _globals, _simplify, _c

TC = ContextVar("TC", 1)

# lane l, element i -> (row, col) of A[16,16], B[16,8], C[16,8]; g = l//4, t = l%4 (PTX ISA, mma.m16n8k16 fragments)
def frag_a(g, t, i): return g + 8 * ((i >> 1) & 1), t * 2 + (i & 1) + 8 * (i >> 2)
def frag_b(g, t, i): return t * 2 + (i & 1) + 8 * (i >> 1), g
def frag_c(g, t, i): return g + 8 * (i >> 1), t * 2 + (i & 1)

def _strip(x: UOp, din) -> UOp | None:
  """The operand as a `din` value: itself, or what a widening CAST converts."""
  if x.dtype == din: return x
  if x.op is Ops.CAST and x.src[0].dtype == din: return x.src[0]
  return None

def _match(k: UOp, renderer):
  """(tensor core, REDUCE, A operand, B operand, m axis, n axis, k axis) or None."""
  tcs = [t for t in getattr(renderer, "tensor_cores", None) or [] if t.dims == (16, 8, 16) and t.threads == 32 and t.name.startswith("mma_m16n8k16")]
  if not TC or not tcs or len(k.src) != 1: return None
  reds = [u for u in k.toposort() if u.op is Ops.REDUCE]
  if len(reds) != 1 or reds[0].arg is not Ops.ADD or len(reds[0].src) != 2: return None
  red, r = reds[0], reds[0].src[1]
  if red.src[0].op is not Ops.MUL or not _bound(r) or _bound(r) % 16: return None
  for tc in tcs:
    a, b = (_strip(x, tc.dtype_in) for x in red.src[0].src)
    if a is None or b is None: continue
    ta, tb = a.toposort(), b.toposort()
    if r not in ta or r not in tb: continue
    glob = _globals(k)
    ms = [g for g in glob if g in ta and g not in tb and _bound(g) and _bound(g) % 16 == 0]
    ns = [g for g in glob if g in tb and g not in ta and _bound(g) and _bound(g) % 8 == 0]
    if ms and ns: return tc, red, a, b, ms[-1], ns[-1], r
  return None

def _tiles(n: int, want: int) -> int:
  w = want
  while w > 1 and n % w: w //= 2
  return w

def tensor_core(k: UOp, renderer, wm: int = 2, wn: int = 2) -> UOp | None:
  """The kernel with WMMAs and its launch dims mapped (SPECIALs), or None where it doesn't apply."""
  if (mt := _match(k, renderer)) is None: return None
  from tinycore.codegen.gpudims import to_gpu_dims
  tc, red, a, b, m, n, r = mt
  M, N, K = _bound(m), _bound(n), _bound(r)
  wm, wn = _tiles(M // 16, wm), _tiles(N // 8, wn)
  t0 = UOp(Ops.RANGE, dtypes.index, (_c(32 * (N // (8 * wn))),), ("g", 1001))   # lane + 32 * warp column
  t1 = UOp(Ops.RANGE, dtypes.index, (_c(M // (16 * wm)),), ("g", 1000))         # warp row
  lane, wc = t0 % 32, t0 // 32
  g, t = lane // 4, lane % 4
  kk = UOp(Ops.RANGE, dtypes.index, (_c(K // 16),), r.arg)
  def row0(i): return t1 * (16 * wm) + 16 * i
  def col0(j): return wc * (8 * wn) + 8 * j
  def vec(dt, xs): return UOp(Ops.VECTORIZE, dt.vec(len(xs)), tuple(xs))
  afr = [vec(tc.dtype_in, [a.substitute({m: row0(i) + ra, r: kk * 16 + ca}) for ra, ca in (frag_a(g, t, e) for e in range(8))]) for i in range(wm)]
  bfr = [vec(tc.dtype_in, [b.substitute({n: col0(j) + cb, r: kk * 16 + rb}) for rb, cb in (frag_b(g, t, e) for e in range(4))]) for j in range(wn)]
  zero = vec(tc.dtype_out, [UOp.const(tc.dtype_out, 0)] * 4)
  stores = []
  for i in range(wm):
    for j in range(wn):
      w = UOp(Ops.WMMA, tc.dtype_out.vec(4), (afr[i], bfr[j], zero), (tc.name, tc.dims))
      for e in range(4):
        acc = UOp(Ops.REDUCE, tc.dtype_out, (UOp(Ops.GEP, tc.dtype_out, (w,), (e,)), kk), Ops.ADD)
        val = acc if red.dtype == tc.dtype_out else UOp(Ops.CAST, red.dtype, (acc,))
        rc, cc = frag_c(g, t, e)
        stores.append(k.src[0].substitute({red: val, m: row0(i) + rc, n: col0(j) + cc}))
  k = _simplify(k.replace(src=tuple(stores)))
  # 4 warps along columns x 2 along rows: whole warps on dim 0, so a retired thread never leaves a warp half-active
  return to_gpu_dims(k, 256, (32 * min(4, N // (8 * wn)), min(2, M // (16 * wm))))
