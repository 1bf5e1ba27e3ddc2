"""The order of a schedule's kernels when some of them assign into a buffer: every kernel that reads the buffer's old
contents runs before the kernel that overwrites them (a write-after-read dependency, which the graph's edges don't
show: the reader points at the BUFFER, not at the ASSIGN).

Without it the order was the graph's walk order, and a kernel that recomputes a value from a buffer (relu(z + b) in
the weight gradient of the next layer) read it after an SGD update assigned into it earlier in the same schedule: the
gradient used the updated bias. Kernels keep the walk order wherever no such dependency moves them."""
from __future__ import annotations
from tinycore.uop import UOp, Ops

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

def assign_order(topo: list[UOp], realize: set) -> list[UOp]:
  """The realized nodes of `topo` in an order that runs each buffer's old-value readers before its ASSIGN."""
  order = [u for u in topo if u in realize]
  assigned = {u.src[0].base: u for u in order if u.op is Ops.ASSIGN and u.src[0].base.op is Ops.BUFFER}
  if not assigned: return order
  deps: dict[UOp, list[UOp]] = {}
  war: dict[UOp, list[UOp]] = {a: [] for a in assigned.values()}   # an assign waits for its buffer's other readers
  for u in order:
    deps[u], bufs = _reads(u, realize)
    for b in bufs:
      if (a := assigned.get(b)) is not None and a is not u: war[a].append(u)
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
      if state.get(n) == 1: continue   # a cycle (a reader that also needs the assign's result): keep the walk order
      state[n] = 1
      stack.append((n, True))
      stack.extend((d, False) for d in reversed(deps[n] + war.get(n, [])) if state.get(d) != 2)
  return out
