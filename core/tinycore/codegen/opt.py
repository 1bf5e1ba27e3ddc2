"""Kernel optimizations on the lowered graph. An *upcast* replaces a loop by U unrolled copies:
- a global (output) range -> U stores per iteration, sharing every load that doesn't depend on it;
- a reduce range -> U independent accumulators, combined after the loop (breaks the add/max dependency chain).
Copies of a REDUCE share their loop (the linearizer groups them), so e.g. a matmul becomes a register tile of
accumulators that the C compiler turns into vector FMAs."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.dtype import dtypes
from tinycore.helpers import getenv
from tinycore.renderer import Renderer

def _c(x): return UOp.const(dtypes.index, x)
def _bound(r: UOp) -> int | None: return r.src[0].arg if r.src[0].op is Ops.CONST else None

def _terms(idx: UOp) -> list[UOp]:
  return _terms(idx.src[0]) + _terms(idx.src[1]) if idx.op is Ops.ADD else [idx]

def _loads(k: UOp) -> list[UOp]: return [u.src[0] for u in k.toposort() if u.op is Ops.LOAD]
def _unit_stride(k: UOp, r: UOp) -> bool:
  """Some load reads consecutive memory along `r` (it's a bare term of the index)."""
  return any(r in _terms(ind.src[1]) for ind in _loads(k))
def _reused(k: UOp, r: UOp) -> bool:
  """Some load doesn't depend on `r`: unrolling `r` shares it between the copies."""
  return any(r not in ind.toposort() for ind in _loads(k))

def _simplify(k: UOp) -> UOp:
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  return graph_rewrite(k, symbolic)

def upcast_global(k: UOp, r: UOp, amt: int) -> UOp:
  nr = UOp(Ops.RANGE, dtypes.index, (_c(_bound(r) // amt),), r.arg)
  stores = [st.substitute({r: nr * amt + u}) for st in k.src for u in range(amt)]
  return _simplify(k.replace(src=tuple(stores)))

def upcast_reduce(k: UOp, r: UOp, amt: int) -> UOp:
  nr = UOp(Ops.RANGE, dtypes.index, (_c(_bound(r) // amt),), r.arg + ("u",))
  repl = {}
  for red in k.toposort():
    if red.op is not Ops.REDUCE or r not in red.src[1:]: continue
    rngs = tuple(nr if x is r else x for x in red.src[1:])
    parts = [UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({r: nr * amt + u}), *rngs), red.arg) for u in range(amt)]
    # combine pairwise: a balanced tree keeps the final combine short
    while len(parts) > 1: parts = [UOp(red.arg, red.dtype, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    repl[red] = parts[0]
  return _simplify(k.substitute(repl)) if repl else k

class CantVectorize(Exception): pass
_VEC_ALU = {Ops.ADD, Ops.MUL, Ops.SUB, Ops.NEG}

def vectorize_global(k: UOp, r: UOp, n: int) -> UOp:
  """Turn output range `r` into n-wide vector lanes: loads/stores along it become vector loads/stores and the math on
  them vector math (renderers with vector types). Only where every index is base + r (contiguous lanes) and the math
  is +,-,*; anything else raises CantVectorize and the caller keeps the scalar plan."""
  rn = UOp(Ops.RANGE, dtypes.index, (_c(_bound(r) // n),), r.arg)
  memo: dict[UOp, UOp] = {}
  def f(u: UOp) -> UOp:
    if (res := memo.get(u)) is not None: return res
    if r not in u.toposort(): res = u
    elif u.op is Ops.INDEX:
      terms = _terms(u.src[1])
      if r not in terms or any(r in t.toposort() for t in terms if t is not r) or terms.count(r) != 1: raise CantVectorize
      if len(u.src) > 2: raise CantVectorize   # a validity mask per lane would need masked vector loads
      base = u.src[1].substitute({r: rn * n})
      res = UOp(Ops.INDEX, u.dtype, (u.src[0], base), ("vec", n))
    elif u.op is Ops.LOAD:
      if u.dtype != dtypes.float32: raise CantVectorize
      res = UOp(Ops.LOAD, u.dtype.vec(n), (f(u.src[0]),))
    elif u.op is Ops.STORE: res = UOp(Ops.STORE, dtypes.void, (f(u.src[0]), f(u.src[1])))
    elif u.op in _VEC_ALU and u.dtype == dtypes.float32: res = UOp(u.op, u.dtype.vec(n), tuple(f(x) for x in u.src))
    elif u.op is Ops.REDUCE and u.arg is Ops.ADD and u.dtype == dtypes.float32:
      res = UOp(Ops.REDUCE, u.dtype.vec(n), (f(u.src[0]), *u.src[1:]), u.arg)
    else: raise CantVectorize
    memo[u] = res
    return res
  return _simplify(k.replace(src=tuple(f(st) for st in k.src)))

def optimize(k: UOp, renderer: Renderer) -> UOp:
  if renderer.device != "CPU" or getenv("NOUPCAST", 0): return k
  topo = k.toposort()
  glob = sorted((u for u in topo if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda r: r.arg)
  reds = [u for u in topo if u.op is Ops.RANGE and u.arg[0] == "r"]
  n_reduce = sum(1 for u in topo if u.op is Ops.REDUCE)
  if not reds or n_reduce > 1: return k
  # output tile: a unit-stride output axis by 16 (vector width) and another axis by 4 (reuse of each vector load)
  done = []
  for g in reversed(glob):
    b = _bound(g)
    if b and _unit_stride(k, g) and _reused(k, g):
      amt = next((a for a in (16, 8, 4) if b % a == 0 and b // a >= 1), None)
      if amt and getattr(renderer, "vector_types", False) and amt >= 8 and getenv("VEC", 1):
        try: k = vectorize_global(k, g, amt); done.append(g.arg); break
        except CantVectorize: pass
      if amt: k = upcast_global(k, g, amt); done.append(g.arg); break
  if done:
    # second tile axis: the one most of the wide loads don't depend on, so each wide load feeds that many accumulators
    glob = sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda r: r.arg)
    wide = [ind for ind in _loads(k) if ind.arg is not None or any(g.arg in done for g in ind.toposort() if g.op is Ops.RANGE)]
    cands = [g for g in reversed(glob) if g.arg not in done and _bound(g) and _bound(g) % 4 == 0 and _bound(g) // 4 >= 2 and _reused(k, g)]
    if cands:
      g = max(cands, key=lambda g: sum(g not in ind.toposort() for ind in wide))
      k = upcast_global(k, g, 8 if _bound(g) % 8 == 0 and _bound(g) // 8 >= 2 else 4)
    return k
  # no output tile: split the innermost unit-stride reduce into independent accumulators
  for r in reversed(reds):
    b = _bound(r)
    if b and b >= 64 and _unit_stride(k, r):
      amt = next((a for a in (16, 8, 4) if b % a == 0), None)
      if amt: return upcast_reduce(k, r, amt)
  return k
