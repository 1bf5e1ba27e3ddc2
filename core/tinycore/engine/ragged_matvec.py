"""Matrix-vector products whose sizes no vector width divides (4095, 4097, a vocabulary of 49153): an aligned main part
plus a thin tail, so the main part gets the vector loads and the row-chunk split that aligned sizes get.

Codegen vectorizes an axis only where the vector width divides it, and the row-chunk split of `vector @ matrix`
(schedule.py) needs a chunk length that divides the reduce. One ragged size therefore made the whole product scalar and
single-threaded: 1x4095 @ 4095x4097 ran at ~0.7 GB/s against ~25 GB/s for 4096. Split instead:
- a ragged reduce (K): sum = sum over the first K0 (a multiple of ALIGN_K) + sum over the last K - K0 elements;
- a ragged output axis that the weight is contiguous along (N of x @ W, W row-major): the first N0 columns and the last
  N - N0 as two products, side by side in the output.
Each part is its own kernel (CONTIGUOUS): fused, the tail's short loop and the main part's long one would share one
kernel, which codegen only tiles when all its reductions run over the same loops. The tail reads < ALIGN of every
row or column: a few percent of the traffic at these sizes."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, index_const
from tinycore.dtype import dtypes
from tinycore.helpers import prod, all_int

ALIGN = 16     # the widest float vector codegen emits: an axis it vectorizes must be a multiple of it
ALIGN_K = 64   # a strided reduce (x @ W, W row-major) is cut into row chunks of 64..512 (schedule.py): a multiple of 64
MIN_SIZE = 64  # axes shorter than this aren't worth a second kernel
MAX_ROWS = 8   # products with up to this many rows of activations (decode at batch 1..8): the weight is read once

def _unit_stride_axis(r: UOp, big: UOp) -> int | None:
  """The axis of the reduce's input along which `big` (the weight) is read contiguously, or None."""
  from tinycore.codegen.lowerer import Lowerer
  from tinycore.codegen.opt import _terms
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  src = r.src[0]
  bufs = list(dict.fromkeys(u for u in src.toposort() if u.op is Ops.BUFFER))
  gl = {b: UOp(Ops.DEFINE_GLOBAL, b.dtype.ptr(b.arg.size), (), i) for i, b in enumerate(bufs)}
  rngs = tuple(UOp(Ops.RANGE, dtypes.index, (index_const(s),), ("a", i)) for i, s in enumerate(src.shape))
  try: val = graph_rewrite(Lowerer().emit(src.substitute(gl), rngs, None), symbolic)
  except NotImplementedError: return None
  mine = set(rngs)
  for ld in (u for u in val.toposort() if u.op is Ops.LOAD and u.src[0].src[0] is gl[big]):
    unit = [t.arg[1] for t in _terms(ld.src[0].src[1]) if t in mine and src.shape[t.arg[1]] > 1]
    if unit: return unit[0]
  return None

def _cut(u: UOp, axis: int, lo: int, hi: int) -> UOp:
  return u.shrink(tuple((lo, hi) if i == axis else (0, s) for i, s in enumerate(u.shape)))

def split_ragged_matvec(r: UOp, has_local: bool) -> UOp | None:
  """`r` (a REDUCE_AXIS) as an aligned main part and a tail when it is a matrix-vector product with a ragged size that
  blocks vectorizing or chunking it; None otherwise (aligned sizes, matmuls with real reuse, GPUs)."""
  src, (op, axes) = r.src[0], r.arg
  if has_local or op is not Ops.ADD or not dtypes.is_float(r.dtype) or len(axes) != 1 or not all_int(src.shape): return None
  k_axis, K = axes[0], src.shape[axes[0]]
  topo = src.toposort()
  bufs = list(dict.fromkeys(u for u in topo if u.op is Ops.BUFFER))
  # products of a weight and activations only: not a plain sum, nor a reduce over another reduce (a variance)
  if len(bufs) < 2 or not any(u.op is Ops.MUL for u in topo) or any(u.op is Ops.REDUCE_AXIS for u in topo): return None
  # the weight: a buffer holding at least 1/MAX_ROWS of the product's multiply-adds, so it is read once, not reused
  big = max(bufs, key=lambda b: b.arg.size, default=None)
  if big is None or big.arg.size * MAX_ROWS < prod(src.shape) or big.arg.size < MIN_SIZE * MIN_SIZE: return None
  if (unit := _unit_stride_axis(r, big)) is None: return None
  k_align = ALIGN if unit == k_axis else ALIGN_K
  if K >= MIN_SIZE and K % k_align:
    k0 = K - K % k_align
    main = UOp(Ops.CONTIGUOUS, r.dtype, (_cut(src, k_axis, 0, k0).r(op, axes),))
    return main + _cut(src, k_axis, k0, K).r(op, axes)
  N = src.shape[unit]
  if unit != k_axis and N >= MIN_SIZE and N % ALIGN:
    n0 = N - N % ALIGN
    parts = [UOp(Ops.CONTIGUOUS, r.dtype, (_cut(src, unit, lo, hi).r(op, axes),)) for lo, hi in ((0, n0), (n0, N))]
    return parts[0].pad(tuple((0, N - n0) if i == unit else (0, 0) for i in range(len(r.shape)))) + \
      parts[1].pad(tuple((n0, 0) if i == unit else (0, 0) for i in range(len(r.shape))))
  return None
