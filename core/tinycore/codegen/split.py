"""Split an output range whose index math divides it: g used as g // c and g % c becomes two ranges, g = go * c + gi;
and merge two output ranges every buffer reads as one (merge_ranges).

A buffer laid out in panels (e.g. a matmul operand packed as [N/16][K][16]) is read at (n // 16) * K*16 + n % 16: one
output axis with a non-affine index, in which the optimizer sees no unit stride. Split in two, the inner range is
unit-stride in that buffer (and in the output), so it can take vector lanes and register tiles like any other axis."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes

def _divisors(k: UOp, g: UOp) -> set[int]:
  """Constants c with both g // c and g % c in the kernel."""
  div, mod = set[int](), set[int]()
  for u in k.toposort():
    if u.op in (Ops.IDIV, Ops.MOD) and u.src[0] is g and u.src[1].op is Ops.CONST: (div if u.op is Ops.IDIV else mod).add(u.src[1].arg)
  return div & mod

def split_ranges(k: UOp) -> UOp:
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  split = False
  for g in sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda r: r.arg):
    b = g.src[0].arg if g.src[0].op is Ops.CONST else None
    # the largest divisor that leaves the outer range at least 4 long (it may be the loop the CPU splits over threads),
    # else the largest there is: unsplit, 2 or 3 panels (N = 50 padded to 64) had no unit-stride axis and ran as scalar
    # dot products, 30x slower (one core, 1000x1000 @ 1000x50: 63 ms)
    cs = sorted((b // c >= 4, c) for c in _divisors(k, g) if b and 1 < c < b and b % c == 0)
    if not cs: continue
    c = cs[-1][1]
    go = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, b // c),), g.arg)
    gi = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, c),), g.arg + (1,))
    k, split = graph_rewrite(k.substitute({g: go * c + gi}), symbolic), True
  if not split: return k
  # renumber in order: renderers name loops by the number (gidx0, gidx1, ...)
  glob = sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda r: r.arg)
  return k.substitute({g: UOp(Ops.RANGE, g.dtype, g.src, ("g", i)) for i, g in enumerate(glob) if g.arg != ("g", i)})

def _globals(k: UOp) -> list[UOp]:
  return sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda r: r.arg)

def merge_ranges(k: UOp) -> UOp:
  """Merge neighbouring output ranges (a, b) into one g = a * |b| + b where every index in the kernel is affine in g
  after it (no g // |b| or g % |b| left): NCHW's pixel axes of a 1x1 conv read as (cout, cin) @ (cin, H*W). Apart, a
  28-wide row is the unit-stride axis, which takes no whole 16-float vector (4-wide scalar unrolls: 8x128x28x28 -> 256
  on one core at 2.8 GFLOP/s); merged, 784 pixels take vectors and a register tile like a matmul's columns."""
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  glob = _globals(k)
  merged = False
  i = len(glob) - 2
  while i >= 0:
    a, b = glob[i], glob[i + 1]
    if a.src[0].op is not Ops.CONST or b.src[0].op is not Ops.CONST: i -= 1; continue
    na, nb = a.src[0].arg, b.src[0].arg
    g = UOp(Ops.RANGE, dtypes.index, (UOp.const(dtypes.index, na * nb),), a.arg)
    c = UOp.const(dtypes.index, nb)
    k2 = graph_rewrite(k.substitute({a: g // c, b: g % c}), symbolic)
    if any(u.op in (Ops.IDIV, Ops.MOD) and u.src[0] is g for u in k2.toposort()): i -= 1; continue
    k, merged = k2, True
    glob[i:i + 2] = [g]
    i = min(i, len(glob) - 2)
  if not merged: return k
  return k.substitute({r: UOp(Ops.RANGE, r.dtype, r.src, ("g", j)) for j, r in enumerate(_globals(k)) if r.arg != ("g", j)})
