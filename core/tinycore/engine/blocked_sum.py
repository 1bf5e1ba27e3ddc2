"""Long float sums in blocks: a sum over more than RUN_MAX elements becomes a sum of block sums.

One float32 accumulator that adds n terms drifts by up to ~n/2 ulp of the total, and past 2^24 it stops growing at
all (Tensor.ones(10**9).sum() was 536870912). Splitting the reduced axis into blocks bounds every accumulator's run:
the first stage writes one partial per block (1/4096 of the input on a CPU, 1/512 where the renderer has workgroups,
so the extra memory traffic is small), and the next stage, itself blocked again while it is long, sums the partials.
Error then grows with the number of stages (log n) instead of n, as with numpy's pairwise sum; the first stage also
has many independent outputs, which is what parallel hardware wants. Only the renderer's has_local capability picks
the block size: no device names."""
from __future__ import annotations
import functools
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.helpers import prod, all_int

RUN_MAX = 8192          # longest float sum done in one stage
REUSE_MAX = 16          # a sum whose input is a broadcast product (a matmul with big operands) is left alone

@functools.lru_cache(maxsize=256)
def _block_len(n: int, most: int) -> int:
  """A block length for a reduction of n elements: a divisor in [256, most] (no remainder), preferring one that 16
  divides (a block then sums in vector lanes: 16+ accumulators, each a short run), then the larger; else `most`."""
  twos = lambda b: min(b & -b, 16)
  return max((b for b in range(256, most + 1) if n % b == 0), key=lambda b: (twos(b), b), default=most)

def _streams(src: UOp) -> bool:
  """Each input element is summed about once (a plain or fused sum), not reused across many outputs as in a matmul,
  whose split into blocks would write one partial per block per output: memory the size of the product."""
  sizes = [u.arg.size for u in src.toposort() if u.op is Ops.BUFFER]
  return not sizes or prod(src.shape) <= REUSE_MAX * max(sizes)

def blocked_float_sum(r: UOp, many_threads: bool = False) -> UOp | None:
  """`r` (a REDUCE_AXIS) as two stages when it is a long float sum, else None. `many_threads` (a renderer with
  workgroups: a GPU) takes blocks of at most 512, so that the first stage has enough outputs to fill the device; a
  CPU's few cores prefer blocks of up to 4096 (fewer partials, long vector runs)."""
  src, (op, axes) = r.src[0], r.arg
  if op is not Ops.ADD or not dtypes.is_float(r.dtype) or not all_int(src.shape): return None
  n = prod(src.shape[a] for a in axes)
  if n <= RUN_MAX or not _streams(src): return None
  keep = [i for i in range(len(src.shape)) if i not in axes]
  ks = tuple(src.shape[i] for i in keep)
  x = src.permute(tuple(keep) + tuple(axes)).reshape(ks + (n,))      # the reduced elements last, as one axis
  b = _block_len(n, 512 if many_threads else 4096)
  q = n // b
  # a length with no good divisor: blocks over the first q*b elements, the short remainder summed on its own
  head = x if q * b == n else x.shrink(tuple((0, s) for s in ks) + ((0, q * b),))
  part = UOp(Ops.CONTIGUOUS, r.dtype, (head.reshape(ks + (q, b)).r(op, (len(ks) + 1,)),))
  out = part.r(op, (len(ks),)).reshape(ks)
  if q * b != n: out = out + x.shrink(tuple((0, s) for s in ks) + ((q * b, n),)).r(op, (len(ks),)).reshape(ks)
  return out.reshape(r.shape)
