"""Linearization: a kernel graph of RANGE/REDUCE/LOAD/STORE becomes a flat program with loops.

Every node is placed in the innermost loop among the ranges it depends on (so loop-invariant work is hoisted), and each
REDUCE becomes an accumulator (DEFINE_REG) updated inside its own loops."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes

def reduce_identity(op: Ops, dtype):
  if op is Ops.ADD: return 0
  if op is Ops.MUL: return 1
  return dtypes.min(dtype)

def linearize(sink: UOp) -> list[UOp]:
  topo = sink.toposort()
  owner: dict[UOp, UOp] = {}                     # reduce range -> its REDUCE
  for u in topo:
    if u.op is Ops.REDUCE:
      for r in u.src[1:]: owner[r] = u
  gl = sorted((u for u in topo if u.op is Ops.RANGE and u not in owner), key=lambda r: r.arg)

  # REDUCEs sharing a range share its loop, so each sits in the loops any of them needs: a reduce whose body is free of the
  # outer loops (a masked-out part of a max, all constants) must not open that range outside them while another reduce
  # over it reads the outer loops' values (its loads would land between the two loops, reading a dead loop variable)
  sharers: dict[UOp, list[UOp]] = {}
  for u in topo:
    if u.op is Ops.REDUCE:
      for r in u.src[1:]: sharers.setdefault(r, []).append(u)
  extra: dict[UOp, frozenset] = {}
  while True:
    rdeps: dict[UOp, frozenset] = {}
    for u in topo:
      d = frozenset().union(*[rdeps[s] for s in u.src]) if u.src else frozenset()
      if u.op is Ops.RANGE: d = d | {u}
      if u.op is Ops.REDUCE: d = (d - set(u.src[1:])) | extra.get(u, frozenset())
      rdeps[u] = d
    grown = False
    for reds in sharers.values():
      if len(reds) < 2: continue
      outer = frozenset().union(*[rdeps[x] for x in reds])
      for x in reds:
        if not (need := outer - set(x.src[1:])) <= rdeps[x]: extra[x], grown = extra.get(x, frozenset()) | need, True
    if not grown: break

  chain: dict[UOp, tuple] = {}
  def scope_of(deps: frozenset) -> tuple:
    best: tuple = ()
    for r in deps:
      c = chain_of(r)
      if len(c) > len(best): best = c
    return best
  def chain_of(r: UOp) -> tuple:
    if r in chain: return chain[r]
    if r not in owner: c = tuple(g for g in gl if g.arg <= r.arg)
    else:
      red = owner[r]
      rs = red.src[1:]
      c = scope_of(rdeps[red]) + rs[:rs.index(r) + 1]
    chain[r] = c
    return c
  scope = {u: (chain_of(u) if u.op is Ops.RANGE else scope_of(rdeps[u])) for u in topo}

  by_scope: dict[tuple, list[UOp]] = {}
  for u in topo:
    if u.op in (Ops.RANGE, Ops.SINK): continue
    by_scope.setdefault(scope[u], []).append(u)

  out: list[UOp] = []
  acc_n = [0]
  done: set[UOp] = set()
  emitted: set[UOp] = set()
  def emit_block(sc: tuple):
    block = by_scope.get(sc, [])
    for u in block:
      if u in emitted: continue
      if u.op is Ops.REDUCE and u not in done:
        # REDUCEs over the same ranges that don't feed each other share one loop nest (upcast copies)
        group = [u] + [x for x in block if x.op is Ops.REDUCE and x is not u and x not in done and x.src[1:] == u.src[1:]
                       and u not in x.toposort() and x not in u.toposort()]
        # everything of this scope the group reads must exist before its loops open
        need = set().union(*[set(x.toposort()) for x in group])
        for d in block:
          if d in need and d not in emitted and d.op is not Ops.REDUCE: emitted.add(d); out.append(d)
        emit_reduce(group, sc)
      emitted.add(u); out.append(u)
  def emit_reduce(group: list[UOp], sc: tuple):
    accs = []
    for red in group:
      # the accumulator names its REDUCE as its source, so the renderer can alias the REDUCE to it
      acc = UOp(Ops.DEFINE_REG, red.dtype, (red,), (acc_n[0], reduce_identity(red.arg, red.dtype)))
      acc_n[0] += 1
      out.append(acc); accs.append(acc); done.add(red)
    rs = group[0].src[1:]
    for j, r in enumerate(rs):
      out.append(r)
      body = len(out)
      emit_block(sc + rs[:j + 1])
    # each update right after its value in the innermost body: a register tile's FMA then follows its broadcast load,
    # which dies there (a 14x32 matmul tile updated at the end kept 14 broadcasts live and gcc spilled 12 accumulators)
    after: dict[UOp, list[UOp]] = {}
    for red, acc in zip(group, accs):
      upd = UOp(red.arg, red.dtype, (acc, red.src[0]))
      after.setdefault(red.src[0], []).extend([upd, UOp(Ops.ASSIGN, red.dtype, (acc, upd))])
    inner = [y for x in out[body:] for y in (x, *after.pop(x, ()))]
    out[body:] = inner
    for ups in after.values(): out.extend(ups)   # a value computed outside the innermost loop (lane-uniform)
    for r in reversed(rs): out.append(UOp(Ops.END, dtypes.void, (r,)))
  # global loops nest in order; each level emits its own nodes before opening the next
  emit_block(())
  for i, g in enumerate(gl):
    out.append(g)
    emit_block(tuple(gl[:i + 1]))
  for g in reversed(gl): out.append(UOp(Ops.END, dtypes.void, (g,)))
  return out
