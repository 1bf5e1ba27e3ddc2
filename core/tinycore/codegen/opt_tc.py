"""Tensor cores: a kernel whose one REDUCE is a sum over k of A[m,k] * B[k,n] (in the tensor core's input dtype, or
widened from it) becomes warp-wide WMMA UOps (D[M0,N0] = A[M0,K0] @ B[K0,N0] + C) for renderers that declare a
TensorCore with fragment layouts (each plugin declares its own: NVIDIA mma.sync m16n8k16, AMD WMMA and MFMA, ...).

Each warp computes WM x WN instruction tiles (M0*WM rows, N0*WN columns): per k step of K0 it loads its lanes' A and B
fragments (shared between the tiles of a row/column by hash-consing), issues WM*WN WMMAs and adds each result's
elements into scalar accumulators (one REDUCE each, all sharing the k loop). Which matrix element a lane holds is the
TensorCore's `frags`; the emulator's layout tables are what the tests check them against.
Launch: dim 0 = lane + threads * (column tile), dim 1 = row tile, any other output axes stay grid dims (gpudims)."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.helpers import ContextVar, ALLOW_TF32
from tinycore.codegen.opt import _bound, _globals, _simplify

TC = ContextVar("TC", 1)

def _strip(x: UOp, din) -> UOp | None:
  """The operand as a `din` value: itself, or what a widening CAST converts."""
  if x.dtype == din: return x
  if x.op is Ops.CAST and x.src[0].dtype == din: return x.src[0]
  return None

def _match(k: UOp, renderer):
  """(tensor core, REDUCE, A operand, B operand, m axis, n axis, k axis) or None."""
  tcs = [t for t in getattr(renderer, "tensor_cores", None) or [] if t.frags is not None and (ALLOW_TF32 or t.dtype_in != dtypes.float32)]
  if not TC or not tcs or len(k.src) != 1: return None
  reds = [u for u in k.toposort() if u.op is Ops.REDUCE]
  if len(reds) != 1 or reds[0].arg is not Ops.ADD or len(reds[0].src) != 2: return None
  red, r = reds[0], reds[0].src[1]
  # a half product summed in float32 (sum_acc_dtype) is CAST(MUL(a, b)) under the reduce
  prod = red.src[0].src[0] if red.src[0].op is Ops.CAST and red.src[0].src[0].op is Ops.MUL else red.src[0]
  if prod.op is not Ops.MUL or not _bound(r): return None
  for tc in tcs:
    M0, N0, K0 = tc.dims
    if _bound(r) % K0: continue
    a, b = (_strip(x, tc.dtype_in) for x in prod.src)
    if a is None or b is None: continue
    ta, tb = a.toposort(), b.toposort()
    if r not in ta or r not in tb: continue
    glob = _globals(k)
    ms = [g for g in glob if g in ta and g not in tb and _bound(g) and _bound(g) % M0 == 0]
    ns = [g for g in glob if g in tb and g not in ta and _bound(g) and _bound(g) % N0 == 0]
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
  (M0, N0, K0), T, (fa, fb, fc) = tc.dims, tc.threads, tc.frags
  ea, eb, ec = tc.elements_per_thread
  M, N, K = _bound(m), _bound(n), _bound(r)
  wm, wn = _tiles(M // M0, wm), _tiles(N // N0, wn)
  t0 = UOp(Ops.RANGE, dtypes.index, (index_const(T * (N // (N0 * wn))),), ("g", 1001))   # lane + T * warp column
  t1 = UOp(Ops.RANGE, dtypes.index, (index_const(M // (M0 * wm)),), ("g", 1000))         # warp row
  lane, wc = t0 % T, t0 // T
  kk = UOp(Ops.RANGE, dtypes.index, (index_const(K // K0),), r.arg)
  def row0(i): return t1 * (M0 * wm) + M0 * i
  def col0(j): return wc * (N0 * wn) + N0 * j
  def vec(dt, xs): return UOp(Ops.VECTORIZE, dt.vec(len(xs)), tuple(xs))
  afr = [vec(tc.dtype_in, [a.substitute({m: row0(i) + ra, r: kk * K0 + ca}) for ra, ca in (fa(lane, e) for e in range(ea))]) for i in range(wm)]
  bfr = [vec(tc.dtype_in, [b.substitute({n: col0(j) + cb, r: kk * K0 + rb}) for rb, cb in (fb(lane, e) for e in range(eb))]) for j in range(wn)]
  zero = vec(tc.dtype_out, [UOp.const(tc.dtype_out, 0)] * ec)
  stores = []
  for i in range(wm):
    for j in range(wn):
      w = UOp(Ops.WMMA, tc.dtype_out.vec(ec), (afr[i], bfr[j], zero), (tc.name, tc.dims))
      for e in range(ec):
        acc = UOp(Ops.REDUCE, tc.dtype_out, (UOp(Ops.GEP, tc.dtype_out, (w,), (e,)), kk), Ops.ADD)
        val = acc if red.dtype == tc.dtype_out else UOp(Ops.CAST, red.dtype, (acc,))
        rc, cc = fc(lane, e)
        stores.append(k.src[0].substitute({red: val, m: row0(i) + rc, n: col0(j) + cc}))
  k = _simplify(k.replace(src=tuple(stores)))
  # up to 4 warps along columns x 2 along rows (at most 256 lanes): whole warps on dim 0, so a retired thread never
  # leaves a warp half-active
  wx = min(4, N // (N0 * wn), max(1, 256 // T))
  return to_gpu_dims(k, 256, (T * wx, min(2, M // (M0 * wm), max(1, 256 // (T * wx)))))
