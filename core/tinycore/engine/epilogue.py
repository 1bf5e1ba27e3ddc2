"""Where a reduction's buffer goes: after the elementwise math that every reader of it applies first.

A reduction read by several kernels gets a buffer (engine/schedule.py). When all of those kernels read it through the
same elementwise function of the same size (a matmul's bias + relu: the next layer's matmul, the relu' mask and the
weight gradient all read relu(x @ w + b)), that function is the better node to realize: the buffer has the same size,
the function becomes the reduction kernel's epilogue and runs once, instead of once per reader (and per output a
reader broadcasts it over). Found as the last node of the reduction's elementwise region that all paths out of the
region pass through (a dominator)."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, GroupOp

REGION_MAX = 64   # elementwise nodes looked at after one reduction (a bound on scheduling time, far above relu or gelu)

def users_of(topo: list[UOp]) -> dict[UOp, list[UOp]]:
  users: dict[UOp, list[UOp]] = {}
  for n in topo:
    for s in n.src: users.setdefault(s, []).append(n)
  return users

def _in_region(n: UOp, realize: set) -> bool:
  return n not in realize and (n.op in GroupOp.Elementwise or n.op is Ops.RESHAPE)

def epilogue_end(r: UOp, users: dict[UOp, list[UOp]], order: dict[UOp, int], realize: set) -> UOp | None:
  """The last elementwise node after `r` through which every path from `r` to another kernel passes, or None."""
  region: list[UOp] = []
  seen, stack = {r}, [r]
  while stack:
    for u in users.get(stack.pop(), ()):
      if u in seen or not _in_region(u, realize): continue
      if len(region) >= REGION_MAX: return None
      seen.add(u); region.append(u); stack.append(u)
  def dominates(d: UOp) -> bool:
    # from r, avoiding d: reaching an edge out of the region means some reader doesn't go through d
    done, todo = {r, d}, [r]
    while todo:
      for u in users.get(todo.pop(), ()):
        if u in done: continue
        if u not in seen: return False
        done.add(u); todo.append(u)
    return True
  for d in sorted((n for n in region if n.op in GroupOp.Elementwise), key=order.__getitem__, reverse=True):
    if dominates(d): return d
  return None
