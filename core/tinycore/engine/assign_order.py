"""The order of a schedule's kernels when some of them assign into a buffer: every kernel that reads the buffer's old
contents runs before the kernel that overwrites them (a write-after-read dependency, which the graph's edges don't
show: the reader points at the BUFFER, not at the ASSIGN).

Without it the order was the graph's walk order, and a kernel that recomputes a value from a buffer (relu(z + b) in
the weight gradient of the next layer) read it after an SGD update assigned into it earlier in the same schedule: the
gradient used the updated bias. Kernels keep the walk order wherever no such dependency moves them."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.engine.rebuild import rebuild

def _reads(u: UOp, realize: set) -> tuple[list[UOp], set[UOp]]:
  """The realized nodes and the BUFFERs the kernel computing `u` reads (its graph up to those)."""
  start = [u.src[1]] if u.op is Ops.ASSIGN else list(u.src)
  nodes: list[UOp] = []
  bufs: set[UOp] = set()
  seen: set[UOp] = set()
  while start:
    n = start.pop()
    if n in seen: continue
    seen.add(n)
    if n in realize: nodes.append(n)
    elif n.op is Ops.BUFFER: bufs.add(n)
    else: start.extend(n.src)
  return nodes, bufs

def _needs(u: UOp, a: UOp, deps: dict[UOp, list[UOp]]) -> bool:
  """Does the kernel of `u` read `a`'s buffer, directly or through kernels before it?"""
  seen, stack = set(), [u]
  while stack:
    for d in deps[stack.pop()]:
      if d is a: return True
      if d not in seen: seen.add(d); stack.append(d)
  return False

def assign_order(topo: list[UOp], realize: set) -> tuple[list[UOp], dict[UOp, list[UOp]]]:
  """The realized nodes of `topo` in an order that runs each buffer's old-value readers before its ASSIGN, and the
  readers that can't (they need the new contents too) with the BUFFERs whose old contents they need copied first."""
  order = [u for u in topo if u in realize]
  stale: dict[UOp, list[UOp]] = {}
  assigned = {u.src[0].base: u for u in order if u.op is Ops.ASSIGN and u.src[0].base.op is Ops.BUFFER}
  if not assigned: return order, stale
  deps: dict[UOp, list[UOp]] = {}
  war: dict[UOp, list[UOp]] = {a: [] for a in assigned.values()}   # an assign waits for its buffer's other readers
  reads: list[tuple[UOp, UOp]] = []
  for u in order:
    deps[u], bufs = _reads(u, realize)
    reads += [(a, u) for b in bufs if (a := assigned.get(b)) is not None and a is not u]
  for a, u in reads:
    # a reader that also needs the assign's result (directly or through other kernels) can't run before it: it reads
    # a copy of the old contents taken at the start instead
    if not _needs(u, a, deps): war[a].append(u)
    else: stale.setdefault(u, []).append(a.src[0].base)
  out: list[UOp] = []
  state: dict[UOp, int] = {}   # 1: on the stack, 2: placed
  for root in order:
    stack = [(root, False)]
    while stack:
      n, expanded = stack.pop()
      if state.get(n) == 2: continue
      if expanded:
        state[n] = 2
        out.append(n)
        continue
      if state.get(n) == 1: continue   # (no cycles: see _needs)
      state[n] = 1
      stack.append((n, True))
      stack.extend((d, False) for d in reversed(deps[n] + war.get(n, [])) if state.get(d) != 2)
  return out, stale

def reading_copies(u: UOp, copies: dict[UOp, UOp], realize: set) -> UOp:
  """`u` with its kernel's direct reads of each BUFFER in `copies` turned into reads of the copy (realized nodes it reads,
  the assign among them, keep reading what they hold)."""
  return rebuild(u, lambda n: copies.get(n, n) if (n is not u and n in realize) or not n.src else None)
