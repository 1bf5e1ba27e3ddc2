"""Tensor-core accumulation in the instruction: in a linearized program, `acc_e += GEP(WMMA(a, b, 0), e)` for every
element e of a WMMA (opt_tc.py and opt_smem.py emit that form: one REDUCE per element) becomes
`acc_e = GEP(WMMA(a, b, {acc_0, acc_1, ...}), e)`: D = A@B + C adds the running sums inside the matrix instruction
instead of in one extra float add per element per k step (64 FADDs next to 32 HMMAs per step of a 128x128 tile: half
the issue slots). A chain of WMMAs over k sub-steps (C of one is the next's input) takes the accumulators at its start.
The sums are the same; only where they are rounded moves (fp32 either way)."""
from __future__ import annotations
from tinycore.uop import UOp, Ops

def _added(u: UOp):
  """(accumulator, WMMA, element) of ASSIGN(acc, ADD(acc, GEP(WMMA, e))), else None."""
  if u.op is not Ops.ASSIGN or u.src[1].op is not Ops.ADD: return None
  acc, add = u.src
  x = add.src[1] if add.src[0] is acc else add.src[0] if add.src[1] is acc else None
  if x is None or x.op is not Ops.GEP or x.src[0].op is not Ops.WMMA or not isinstance(x.arg, tuple) or len(x.arg) != 1: return None
  return acc, x.src[0], x.arg[0]

def fuse_mma_accumulate(uops: list[UOp]) -> list[UOp]:
  users: dict[UOp, int] = {}
  at = {u: i for i, u in enumerate(uops)}
  for u in uops:
    for s in u.src: users[s] = users.get(s, 0) + 1
  found: dict[UOp, dict[int, tuple[UOp, UOp]]] = {}
  for u in uops:
    if (m := _added(u)) is not None: found.setdefault(m[1], {})[m[2]] = (m[0], u.src[1])
  repl: dict[UOp, UOp] = {}
  before: dict[UOp, list[UOp]] = {}   # node -> new nodes to place right before it
  for w, els in found.items():
    n = w.dtype.count
    if sorted(els) != list(range(n)) or len({acc for acc, _ in els.values()}) != n: continue
    # each element of w read once (by its add), each inner WMMA of the chain only by the next
    if users.get(w, 0) != n: continue
    chain = [w]
    while chain[-1].src[2].op is Ops.WMMA and users.get(chain[-1].src[2], 0) == 1: chain.append(chain[-1].src[2])
    zero = chain[-1].src[2]
    if zero.op is not Ops.VECTORIZE or not all(s.op is Ops.CONST and s.arg == 0 for s in zero.src): continue
    # the accumulators must exist before the chain starts (a k loop of one step was folded away: they follow it)
    if any(at.get(els[e][0], len(uops)) > at.get(chain[-1], -1) for e in range(n)): continue
    accs = UOp(Ops.VECTORIZE, zero.dtype, tuple(els[e][0] for e in range(n)))
    before.setdefault(chain[-1], []).append(accs)
    prev = accs
    for x in reversed(chain):
      prev = repl[x] = x.replace(src=(x.src[0], x.src[1], prev))
    for e, (_, add) in els.items(): repl[add] = UOp(Ops.GEP, add.dtype, (prev,), (e,))
  if not repl: return uops
  out: list[UOp] = []
  done: dict[UOp, UOp] = {}
  seen: set[UOp] = set()
  for u in uops:
    nu = repl.get(u, u)
    # a REDUCE stays as it was: after the loop it only names its accumulator (DEFINE_REG's source), and rebuilding it
    # on the fused sum, which reads that accumulator, would make the program cyclic
    if u not in repl and u.op is not Ops.REDUCE: nu = nu.replace(src=tuple(done.get(s, s) for s in nu.src))
    for b in before.get(u, []):
      if b not in seen: out.append(b); seen.add(b)
    done[u] = nu
    if nu not in seen: out.append(nu); seen.add(nu)
  used = {s for u in out for s in u.src}
  return [u for u in out if u.op is not Ops.VECTORIZE or u in used]   # the zero C operands left behind

FMA_CHAIN = "fma_chain"   # MULACC arg: opt_simt.py's per-step chains, the only ones rewritten (other kernels keep their sums)

def _fma_chain(x: UOp, users: dict) -> list[UOp] | None:
  """The nodes of MULACC(a_n, b_n, ... MULACC(a_1, b_1, MUL(a_0, b_0))), innermost first, each used once, else None."""
  chain = []
  while x.op is Ops.MULACC and x.arg == FMA_CHAIN:
    chain.append(x)
    x = x.src[2]
    if users.get(x, 0) != 1: return None
  if x.op is not Ops.MUL or not chain: return None   # a lone acc + a*b is any kernel's, not opt_simt's chain
  return [x] + chain[::-1]

def fuse_fma_accumulate(uops: list[UOp]) -> list[UOp]:
  """`acc = acc + (a_0*b_0 + a_1*b_1 + ...)` (codegen/opt_simt.py's per-step FMA chain under a REDUCE) becomes
  `acc = a_n*b_n + (... + (a_0*b_0 + acc))`: one FMA per product and no add per step. fp32 either way; the sum is
  reassociated (the running sum enters first instead of last)."""
  users: dict[UOp, int] = {}
  for u in uops:
    if u.op is Ops.REDUCE: continue   # after its loop it only names its accumulator
    for s in u.src: users[s] = users.get(s, 0) + 1
  repl: dict[UOp, UOp] = {}
  at = {u: i for i, u in enumerate(uops)}
  for u in uops:
    if u.op is not Ops.ASSIGN or u.src[1].op is not Ops.ADD or users.get(u.src[1], 0) != 1: continue
    acc, add = u.src
    if acc.op is not Ops.DEFINE_REG or add.src[0] is not acc or users.get(add.src[1], 0) != 1: continue
    if (chain := _fma_chain(add.src[1], users)) is None: continue
    # the chain must run in the accumulator's loop body, after it exists, with no loop boundary before the update
    lo, hi = at.get(chain[0], -1), at[u]
    if at.get(acc, len(uops)) > lo or any(x.op in (Ops.RANGE, Ops.END) for x in uops[lo:hi]): continue
    prev = acc
    for x in chain:
      prev = repl[x] = UOp(Ops.MULACC, x.dtype, (x.src[0], x.src[1], prev), FMA_CHAIN)
    repl[add] = prev
  if not repl: return uops
  out, done = [], {}
  for u in uops:
    if u.op is Ops.ADD and u in repl: done[u] = repl[u]; continue   # the add is gone: its ASSIGN takes the chain's end
    nu = repl.get(u, u)
    if u.op is not Ops.REDUCE: nu = nu.replace(src=tuple(done.get(s, s) for s in nu.src))   # see fuse_mma_accumulate
    done[u] = nu
    out.append(nu)
  return out
