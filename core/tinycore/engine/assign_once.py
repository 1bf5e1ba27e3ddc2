"""An assign runs once. `a.assign(a + 1)` leaves an ASSIGN node in `a`'s graph; a tensor built from `a` before it ran
(`b = a * 2`) holds that node too. Whichever is realized first runs the update; every later realize of a graph that
still holds the node must read the target's new contents instead of running the update a second time.

Nodes are hash-consed, so an assign built the same way as one that is pending or has run (`a.assign(a + 1)` again
after the first ran, or through a second tensor on the same buffer) would be that very node: `fresh` gives each
assign its own identity. Both tables are weak: an assign is forgotten once no graph holds it."""
from __future__ import annotations
import itertools, weakref
from tinycore.uop import UOp, Ops

_pending: weakref.WeakSet[UOp] = weakref.WeakSet()
_ran: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()   # assign -> its target, which holds the result
_serial = itertools.count(1)

def fresh(target: UOp, value: UOp) -> UOp:
  """A new assign of `value` into `target`, distinct from every assign still pending or already run."""
  u = UOp(Ops.ASSIGN, target.dtype, (target, value))
  if u in _pending or u in _ran: u = u.replace(arg=next(_serial))
  _pending.add(u)
  return u

def resolve(uops: list[UOp]) -> list[UOp]:
  """The graphs with every assign that already ran replaced by its target."""
  if not _ran: return uops
  out = []
  for u in uops:
    hits = {n: _ran[n] for n in u.toposort() if n.op is Ops.ASSIGN and n in _ran}
    out.append(u.substitute(hits) if hits else u)
  return out

def mark_ran(uops: list[UOp]) -> None:
  """After `uops` were realized: the pending assigns in their graphs have run."""
  if not _pending: return
  for u in uops:
    for n in u.toposort():
      if n.op is Ops.ASSIGN and n in _pending:
        _pending.discard(n)
        _ran[n] = resolve([n.src[0]])[0]   # a chained target (an assign of an assign) reads its own target
