"""An assign runs once. `a.assign(a + 1)` leaves an ASSIGN node in `a`'s graph; a tensor built from `a` before it ran
(`b = a * 2`) holds that node too. Whichever is realized first runs the update; every later realize of a graph that
still holds the node must read the target's new contents instead of running the update a second time.

Nodes are hash-consed, so an assign built the same way as one that is pending or has run (`a.assign(a + 1)` again
after the first ran, or through a second tensor on the same buffer) would be that very node: `fresh` gives each
assign its own identity. Both tables are weak: an assign is forgotten once no graph holds it.

The walks here cache nothing on the user's nodes: `UOp.toposort()` caches a list that holds the node itself, which
makes a graph root (a realized `Tensor(x)`'s BUFFER node, say) cyclic garbage instead of freeing it by refcount when
its last tensor goes, so its buffer outlives every reference to it until a collection (and two such nodes in a chain
take two collections: the hash-cons table's key of the upper one holds the lower one until the first pass frees it).
For the same reason the tables hold no UOp strongly: a target kept as the value of a dead assign's entry would stay
reachable through the pass that frees the assign, and need one more."""
from __future__ import annotations
import itertools, weakref
from tinycore.uop import UOp, Ops
from tinycore.engine.rebuild import rebuild

_pending: weakref.WeakSet[UOp] = weakref.WeakSet()
_ran: weakref.WeakSet[UOp] = weakref.WeakSet()   # not assign -> target: a value held here outlives its key's collection
_serial = itertools.count(1)

def fresh(target: UOp, value: UOp) -> UOp:
  """A new assign of `value` into `target`, distinct from every assign still pending or already run."""
  u = UOp(Ops.ASSIGN, target.dtype, (target, value))
  if u in _pending or u in _ran: u = u.replace(arg=next(_serial))
  _pending.add(u)
  return u

def _assigns(roots: list[UOp]) -> list[UOp]:
  """The ASSIGN nodes under `roots` (a plain DFS: this runs on every realize while either table is non-empty)."""
  seen = set(roots)
  stack = list(seen)
  out: list[UOp] = []
  ASSIGN = Ops.ASSIGN
  while stack:
    n = stack.pop()
    if n.op is ASSIGN: out.append(n)
    for s in n.src:
      if s not in seen:
        seen.add(s)
        stack.append(s)
  return out

def _targets(ran: list[UOp]) -> dict[UOp, UOp]:
  """What each assign that ran reads as: its target, with the assigns in it that ran (a chain: an assign of an assign)
  read as their own targets, inner ones first (a loop, not recursion: a lazily built chain can be long)."""
  out: dict[UOp, UOp] = {}
  stack = list(ran)
  while stack:
    n = stack[-1]
    if n in out: stack.pop(); continue
    inner = [a for a in _assigns([n.src[0]]) if a in _ran]
    if todo := [a for a in inner if a not in out]: stack.extend(todo); continue
    out[n] = _substitute(n.src[0], {a: out[a] for a in inner})
    stack.pop()
  return out

def _substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
  """`root` with the nodes in `mapping` replaced (UOp.substitute without caching a toposort on root)."""
  return rebuild(root, mapping.get) if mapping else root

def resolve(uops: list[UOp]) -> tuple[list[UOp], list[UOp]]:
  """The graphs with every assign that already ran replaced by its target, and the pending assigns left in them."""
  if not _ran and not _pending: return uops, []
  found = _assigns(uops)
  if hits := _targets([n for n in found if n in _ran]):
    uops = [_substitute(u, hits) for u in uops]
    found = _assigns(uops)   # what the hits cut off doesn't run
  return uops, [n for n in found if n in _pending]

def mark_ran(assigns: list[UOp]) -> None:
  """After a realize that held `assigns`: they have run."""
  for n in assigns:
    _pending.discard(n)
    _ran.add(n)
