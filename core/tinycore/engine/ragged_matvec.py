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
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.helpers import prod, all_int
from tinycore.engine.operand_strides import Read, operand_reads

ALIGN = 16     # the widest float vector codegen emits: an axis it vectorizes must be a multiple of it
ALIGN_K = 64   # a strided reduce (x @ W, W row-major) is cut into row chunks of 64..512 (schedule.py): a multiple of 64
MIN_SIZE = 64  # axes shorter than this aren't worth a second kernel
MAX_ROWS = 8   # products with up to this many rows of activations (decode at batch 1..8): the weight is read once

def _unit_stride_axis(src: UOp, big: Read) -> int | None:
  """The axis of the reduce's input along which `big` (the weight) is read contiguously, or None."""
  if big.strides is None: return None
  return next((i for i, (s, st) in enumerate(zip(src.shape, big.strides)) if st == 1 and s > 1), None)

def _cut(u: UOp, axis: int, lo: int, hi: int) -> UOp:
  return u.shrink(tuple((lo, hi) if i == axis else (0, s) for i, s in enumerate(u.shape)))

def split_ragged_matvec(r: UOp, has_local: bool) -> UOp | None:
  """`r` (a REDUCE_AXIS) as an aligned main part and a tail when it is a matrix-vector product with a ragged size that
  blocks vectorizing or chunking it; None otherwise (aligned sizes, matmuls with real reuse, GPUs)."""
  src, (op, axes) = r.src[0], r.arg
  if has_local or op is not Ops.ADD or not dtypes.is_float(r.dtype) or len(axes) != 1 or not all_int(src.shape): return None
  k_axis, K = axes[0], src.shape[axes[0]]
  # nothing ragged: every size a multiple of the widest alignment (checked first: it costs no walk of the graph)
  if all(s % ALIGN_K == 0 for s in src.shape): return None
  # products of a weight and activations only: not a plain sum, nor a reduce over another reduce (a variance)
  if (got := operand_reads(src)) is None or got.nested_reduce or Ops.MUL not in got.ops: return None
  if len({rd.node for rd in got.reads}) < 2: return None
  # the weight: a buffer holding at least 1/MAX_ROWS of the product's multiply-adds, so it is read once, not reused
  big = max(got.reads, key=lambda rd: rd.size)
  if big.size * MAX_ROWS < prod(src.shape) or big.size < MIN_SIZE * MIN_SIZE: return None
  if (unit := _unit_stride_axis(src, big)) is None: return None
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
