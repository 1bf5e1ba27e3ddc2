"""No kernel reads or writes outside a buffer because of a Variable's value.

A kernel with symbolic sizes is compiled once for every value in its Variables' declared ranges, so its index math can
only be proven in bounds once the values are known. Before each launch, every access whose index depends on a Variable
is re-ranged with the values of this call (and the mask it is gated by) against the real size of the buffer it
addresses; one that can leave the buffer stops the launch with an error naming the buffer, the range and the values.
Accesses without Variables are in bounds by construction and cost nothing here."""
from __future__ import annotations
from tinycore.uop import UOp, Ops

class OutOfBoundsAccess(IndexError):
  """A launch would touch memory outside a buffer for these Variable values."""

def symbolic_accesses(uops: list[UOp]) -> list[tuple[int, int, UOp, UOp | None, int]]:
  """(buffer number, element bytes, index, gate or None, lanes) of each access whose index or gate depends on a Variable."""
  out = []
  for u in uops:
    if u.op is not Ops.INDEX or u.src[0].op is not Ops.DEFINE_GLOBAL: continue
    deps = [x for s in u.src[1:] for x in s.toposort()]
    if not any(x.op is Ops.DEFINE_VAR for x in deps): continue
    lanes = u.arg[1] if isinstance(u.arg, tuple) and len(u.arg) in (2, 3) and u.arg[0] == "vec" else 1
    out.append((u.src[0].arg, u.src[0].dtype.base.itemsize, u.src[1], u.src[2] if len(u.src) > 2 else None, lanes))
  return out

def index_range(idx: UOp, gate: UOp | None, values: dict[UOp, int]) -> tuple[int, int] | None:
  """The lowest and highest element `idx` can address with the Variables at `values`, where `gate` holds (None: never)."""
  from tinycore.symbolic import uop_given_valid, sym_simplify, _bounds
  sub = {v: UOp.const(v.dtype, val) for v, val in values.items()}
  i = sym_simplify(idx.substitute(sub))   # simplified like the gate, so both name the same (now constant-bound) loops
  if gate is None: return i.vmin, i.vmax
  g = sym_simplify(gate.substitute(sub))
  if g.op is Ops.CONST: return (i.vmin, i.vmax) if g.arg else None   # masked off for every thread
  i = uop_given_valid(g, i)
  # the gate's bounds on the loops and values the index is built from (a padded view reads only where its mask holds)
  tight = {}
  for k, (e, (lo, hi)) in enumerate(_bounds(g).items()):
    if lo > hi: return None
    if e.op is not Ops.CONST and (lo, hi) != (e.vmin, e.vmax): tight[e] = UOp.variable(f"__gate{k}", int(lo), int(hi), e.dtype)
  i = i.substitute(tight) if tight else i
  return i.vmin, i.vmax

def check_bounds(accesses, nbytes: list[int], values: dict[UOp, int], kernel: str) -> None:
  """Raise OutOfBoundsAccess if an access can leave its buffer (`nbytes[n]`: bytes of buffer n) with `values`."""
  for n, itemsize, idx, gate, lanes in accesses:
    if (r := index_range(idx, gate, values)) is None: continue
    lo, hi = r
    size = nbytes[n] // itemsize
    if lo < 0 or hi + lanes - 1 >= size:
      vals = ", ".join(f"{v.arg[0]}={val}" for v, val in sorted(values.items(), key=lambda kv: kv[0].arg[0]))
      raise OutOfBoundsAccess(f"kernel {kernel} would access elements {lo}..{hi + lanes - 1} of buffer {n}, which has {size} "
                              f"elements, with {vals}: a Variable's value makes a view larger than the data it reads")
