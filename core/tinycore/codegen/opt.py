"""Kernel optimizations on the lowered graph. An *upcast* replaces a loop by U unrolled copies:
- a global (output) range -> U stores per iteration, sharing every load that doesn't depend on it;
- a reduce range -> U independent accumulators, combined after the loop (breaks the add/max dependency chain).
Copies of a REDUCE share their loop (the linearizer groups them), so e.g. a matmul becomes a register tile of
accumulators that the C compiler turns into vector FMAs."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, GroupOp, index_const
from tinycore.dtype import dtypes
from tinycore.helpers import getenv
from tinycore.renderer import Renderer
from tinycore.viz import switch as viz

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

def _reused_big(k: UOp, g: UOp) -> bool:
  """Some load that doesn't depend on `g` varies with another output axis: sharing it between copies of `g` saves real
  memory traffic (a weight gradient's operands), unlike a vector every output reads (it stays in L1)."""
  return any(g not in ind.toposort() and any(u.op is Ops.RANGE and u.arg[0] == "g" for u in ind.toposort()) for ind in _loads(k))

def _streamed(k: UOp, g: UOp) -> bool:
  """Some load along `g` also walks a reduce range: a streamed operand, not a per-output bias or residual."""
  return any(g in _terms(ind.src[1]) and any(u.op is Ops.RANGE and u.arg[0] == "r" for u in ind.src[1].toposort()) for ind in _loads(k))

def _simplify(k: UOp) -> UOp:
  from tinycore.rewrite import graph_rewrite
  from tinycore.symbolic import symbolic
  return graph_rewrite(k, symbolic)

def upcast_global(k: UOp, r: UOp, amt: int) -> UOp:
  nr = UOp(Ops.RANGE, dtypes.index, (index_const(_bound(r) // amt),), r.arg)
  stores = [st.substitute({r: nr * amt + u}) for st in k.src for u in range(amt)]
  return _simplify(k.replace(src=tuple(stores)))

def upcast_global_tail(k: UOp, r: UOp, amt: int) -> UOp:
  """upcast_global for an amount that needn't divide the axis: ceil(b/amt) iterations of `amt` copies, copy u at
  position nr*amt + u clamped to the last one (b-1), and each store gated to positions < b. The last iteration then
  recomputes real rows (in bounds, stores off) instead of a second kernel or loop for the leftover: a 14-row register
  tile on 1024 rows is 74 tiles, 12 of the last tile's rows repeats of row 1023."""
  b = _bound(r)
  nr = UOp(Ops.RANGE, dtypes.index, (index_const(-(-b // amt)),), r.arg)
  stores = []
  # row by row (all of a row's stores, then the next row's): each broadcast element of the row operand then feeds its
  # FMAs as soon as it is loaded; column by column, gcc loaded all 14 broadcasts first and spilled 12 accumulators
  for u in range(amt):
    for st in k.src:
      pos = nr * amt + u
      inside = UOp(Ops.CMPLT, dtypes.bool, (pos, index_const(b)))
      st2 = st.substitute({r: UOp(Ops.WHERE, dtypes.index, (inside, pos, index_const(b - 1)))})
      gate = _simplify(inside)
      if st2.op is Ops.STORE and not (gate.op is Ops.CONST and gate.arg is True):
        ind = st2.src[0]
        g = gate if len(ind.src) < 3 else UOp(Ops.AND, dtypes.bool, (ind.src[2], gate))
        st2 = st2.replace(src=(ind.replace(src=(ind.src[0], ind.src[1], g)), *st2.src[1:]))
      stores.append(st2)
  return _simplify(k.replace(src=tuple(stores)))

def upcast_reduce(k: UOp, r: UOp, amt: int) -> UOp:
  nr = UOp(Ops.RANGE, dtypes.index, (index_const(_bound(r) // amt),), r.arg + ("u",))
  repl = {}
  for red in k.toposort():
    if red.op is not Ops.REDUCE or r not in red.src[1:]: continue
    rngs = tuple(nr if x is r else x for x in red.src[1:])
    parts = [UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({r: nr * amt + u}), *rngs), red.arg) for u in range(amt)]
    # combine pairwise: a balanced tree keeps the final combine short
    while len(parts) > 1:
      parts = [UOp(red.arg, red.dtype, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    repl[red] = parts[0]
  return _simplify(k.substitute(repl)) if repl else k

def merge_reduce_loops(k: UOp) -> UOp:
  """Side-by-side reductions over loops of the same sizes (SwiGLU's gate and up products) share one loop, so the
  input they both read is loaded once and the optimizations below see one reduce loop. One that reads another's
  result stays apart."""
  reds = [u for u in k.toposort() if u.op is Ops.REDUCE]
  if len(reds) < 2: return k
  first: dict[tuple, tuple] = {}
  repl: dict[UOp, UOp] = {}
  for red in reds:
    if any(u.op is Ops.REDUCE for u in red.src[0].toposort()) or any(red in x.src[0].toposort() for x in reds if x is not red): continue
    # same loop sizes and the same enclosing output loops (a reduce that varies with none of them is hoisted apart)
    outer = frozenset(u for u in red.src[0].toposort() if u.op is Ops.RANGE and u not in red.src[1:])
    key = (tuple(_bound(r) for r in red.src[1:]), outer)
    if None in key[0]: continue
    if key not in first: first[key] = red.src[1:]
    else: repl.update({r: f for r, f in zip(red.src[1:], first[key]) if r is not f})
  return _simplify(k.substitute(repl)) if repl else k

class CantVectorize(Exception): pass
_VEC_ALU = {Ops.ADD, Ops.MUL, Ops.SUB, Ops.NEG, Ops.EXP2, Ops.RECIP, Ops.FDIV}
_VEC_SELECT = {Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.WHERE, Ops.MAX}
# bit ops on byte lanes: unpacking quantized weight blocks (nibbles, 2-bit fields, high bits) from their raw bytes
_VEC_BYTE_OPS = {Ops.AND, Ops.OR, Ops.XOR, Ops.SHR, Ops.SHL, Ops.ADD, Ops.SUB}
_BYTES = (dtypes.int8, dtypes.uint8)

def _lanes(r: UOp, rn: UOp, n: int, gather: bool = False, shared_gates: bool = False):
  """A rewriter turning values that vary along range `r` into n-wide vectors (lanes r = rn*n + 0..n-1). Loads must be
  contiguous along r (index = base + r) and the math on them in the vector-safe set; else CantVectorize. With `gather`,
  a float load outside every reduce loop that isn't contiguous (an SGD update fused into a weight gradient reads the old
  weight once per output, strided like the lane-stored output) becomes n scalar loads put together. With
  `shared_gates`, a load gated by a condition that doesn't vary along r (a pad along another axis) becomes a vector
  load under that one gate (its renderer reads all lanes or gives zeros)."""
  memo: dict[UOp, UOp] = {}
  failed: set[UOp] = set()
  varies: dict[UOp, bool] = {}   # node -> whether it depends on r
  def along_r(u: UOp) -> bool:
    # filled sources first for what is missing (a toposort per node was quadratic in a long chain's length)
    stack = [u]
    while stack:
      x = stack[-1]
      if x in varies:
        stack.pop()
        continue
      ready = True
      for s in x.src:
        if s not in varies:
          stack.append(s)
          ready = False
      if ready: varies[stack.pop()] = x is r or any(varies[s] for s in x.src)
    return varies[u]
  def f(u: UOp) -> UOp:
    """u in lanes. Values below it first, in order (each call then finds its sources done): a kernel can be a chain of
    thousands of ops, deeper than Python's recursion limit; a value that can't be vectorized stays known as such."""
    stack = [u]
    while stack:
      x = stack[-1]
      if x in memo or x in failed:
        stack.pop()
        continue
      ready = True
      for s in x.src:
        if s.dtype != dtypes.index and s not in memo and s not in failed:   # index math is handled whole, where it is used
          stack.append(s)
          ready = False
      if not ready: continue
      stack.pop()
      if x is not u:
        try: one(x)
        except CantVectorize: failed.add(x)
    return one(u)
  def one(u: UOp) -> UOp:
    if (res := memo.get(u)) is not None: return res
    if u in failed: raise CantVectorize
    if not along_r(u): res = u
    elif u.op is Ops.INDEX:
      terms = _terms(u.src[1])
      # a validity mask per lane would need masked vector loads; one that every lane shares gates the whole vector
      if len(u.src) > 2 and (not shared_gates or along_r(u.src[2])): raise CantVectorize
      gate = u.src[2:]
      if r in terms and terms.count(r) == 1 and not any(r in t.toposort() for t in terms if t is not r):
        res = UOp(Ops.INDEX, u.dtype, (u.src[0], u.src[1].substitute({r: rn * n}), *gate), ("vec", n))
      else:
        # every lane reads one element (a quantized block's scale: (r*16 + lane) // 32): one scalar load that the vector
        # math broadcasts
        first = _simplify(u.src[1].substitute({r: rn * n}))
        lanes = [_simplify(u.src[1].substitute({r: rn * n + i})) for i in range(1, n)]
        if all(x is first for x in lanes): res = UOp(Ops.INDEX, u.dtype, (u.src[0], first, *gate))
        # or consecutive elements once the lanes' index math folds (a quantized block's bytes: (r//32)*34 + r%32 + 2
        # is rn//2*34 + rn%2*16 + lane + 2 for r = rn*16 + lane)
        elif all(x is _simplify(first + i) for i, x in enumerate(lanes, 1)): res = UOp(Ops.INDEX, u.dtype, (u.src[0], first, *gate), ("vec", n))
        else: raise CantVectorize
    elif u.op is Ops.LOAD:
      try: idx = f(u.src[0])
      except CantVectorize:
        if not gather or u.dtype != dtypes.float32 or any(x.op is Ops.RANGE and x.arg[0] == "r" for x in u.src[0].toposort()): raise
        lanes = [u.replace(src=(_simplify(u.src[0].substitute({r: rn * n + i})), *u.src[1:])) for i in range(n)]
        memo[u] = res = UOp(Ops.VECTORIZE, u.dtype.vec(n), tuple(lanes))
        return res
      if idx.arg is None: res = UOp(Ops.LOAD, u.dtype, (idx,))   # the same element in every lane
      # half and 8-bit integer loads widen to float lanes (LLM weights: F16, Q8_0's int8 values); other types stay scalar
      elif u.dtype not in (dtypes.float32, dtypes.float16, dtypes.int8, dtypes.uint8): raise CantVectorize
      else: res = UOp(Ops.LOAD, u.dtype.vec(n), (idx,))
    elif u.op is Ops.CAST and u.dtype == dtypes.float32 and u.src[0].dtype in (dtypes.float16, dtypes.int8, dtypes.uint8):
      x = f(u.src[0])
      # 8-bit lanes widen through int32 lanes: GCC turns a direct char16 -> float16 conversion into 16 scalar converts
      if x.dtype.count > 1 and x.dtype.scalar() in _BYTES: x = UOp(Ops.CAST, dtypes.int32.vec(x.dtype.count), (x,))
      res = UOp(Ops.CAST, u.dtype.vec(x.dtype.count) if x.dtype.count > 1 else u.dtype, (x,))
    elif u.op in _VEC_BYTE_OPS and u.dtype in _BYTES:
      srcs = tuple(f(x) for x in u.src)
      # a lane-uniform shift amount or mask is fine (vector op scalar); a lane-uniform value shifted by per-lane amounts isn't
      if u.op in (Ops.SHL, Ops.SHR) and srcs[0].dtype.count == 1 and srcs[1].dtype.count > 1: raise CantVectorize
      res = UOp(u.op, u.dtype.vec(n), srcs) if any(x.dtype.count > 1 for x in srcs) else u.replace(src=srcs)
    elif u.dtype == dtypes.index and u.op in GroupOp.ALU:
      # index math off the loads (which nibble of a byte, from the element number): fine when it is the same in every lane
      first = _simplify(u.substitute({r: rn * n}))
      if any(_simplify(u.substitute({r: rn * n + i})) is not first for i in range(1, n)): raise CantVectorize
      res = first
    elif u.op is Ops.STORE:
      ind, val = f(u.src[0]), f(u.src[1])
      if ind.arg is None or val.dtype.count != n: raise CantVectorize
      res = UOp(Ops.STORE, dtypes.void, (ind, val))
    elif u.op in _VEC_ALU and u.dtype == dtypes.float32:
      srcs = tuple(f(x) for x in u.src)   # on lane-uniform values only, the math stays scalar
      res = UOp(u.op, u.dtype.vec(n), srcs) if any(x.dtype.count > 1 for x in srcs) else u.replace(src=srcs)
    elif u.op in _VEC_SELECT and all(x.dtype in (dtypes.float32, dtypes.bool) for x in u.src):
      # comparisons give lane masks, WHERE/MAX select with them (relu, its gradient, clamps)
      srcs = tuple(f(x) for x in u.src)
      vec_dt = (dtypes.bool if u.op in GroupOp.Comparison else dtypes.float32).vec(n)
      res = UOp(u.op, vec_dt, srcs) if any(x.dtype.count > 1 for x in srcs) else u.replace(src=srcs)
    elif u.op in (Ops.OR, Ops.AND, Ops.XOR) and u.dtype == dtypes.bool:
      # lane masks combined (relu's x<0 | x==0 once the gradient's comparison is folded in)
      srcs = tuple(f(x) for x in u.src)
      # (a lane-uniform bool next to a mask would be a 0/1 scalar, not an all-ones lane: not handled)
      if len({x.dtype.count for x in srcs}) > 1: raise CantVectorize
      res = UOp(u.op, dtypes.bool.vec(n), srcs) if srcs[0].dtype.count > 1 else u.replace(src=srcs)
    elif u.op is Ops.REDUCE and u.arg is Ops.ADD and u.dtype == dtypes.float32 and r not in u.src[1:]:
      if (x := f(u.src[0])).dtype.count != n: raise CantVectorize   # lane-uniform: nothing to gain
      res = UOp(Ops.REDUCE, u.dtype.vec(n), (x, *u.src[1:]), u.arg)
    elif u.op in GroupOp.ALU or u.op in (Ops.CAST, Ops.BITCAST):
      # math on lane-uniform values only (a block's float16 scale built from its two bytes) stays scalar
      srcs = tuple(f(x) for x in u.src)
      if any(x.dtype.count > 1 for x in srcs): raise CantVectorize
      res = u.replace(src=srcs)
    else: raise CantVectorize
    memo[u] = res
    return res
  return f

def vectorize_global(k: UOp, r: UOp, n: int, scatter: bool = False, shared_gates: bool = False) -> UOp:
  """Turn output range `r` into n-wide vector lanes: loads/stores along it become vector loads/stores and the math on
  them vector math (renderers with vector types). With `scatter`, a store that isn't contiguous along `r` (a conv's
  output channel in NCHW) writes its n lanes one by one instead of failing. `shared_gates`: see _lanes."""
  rn = UOp(Ops.RANGE, dtypes.index, (index_const(_bound(r) // n),), r.arg)
  f = _lanes(r, rn, n, gather=scatter, shared_gates=shared_gates)
  stores: list[UOp] = []
  for st in k.src:
    try: stores.append(f(st))
    except CantVectorize:
      if not scatter or st.op is not Ops.STORE or (val := f(st.src[1])).dtype.count != n: raise
      stores += [UOp(Ops.STORE, dtypes.void, (_simplify(st.src[0].substitute({r: rn * n + i})), val.gep(i))) for i in range(n)]
  return _simplify(k.replace(src=tuple(stores)))

def vectorize_reduce(k: UOp, r: UOp, n: int) -> UOp:
  """Reduce along `r` in n vector lanes (a vector accumulator), then combine the lanes once after the loop."""
  rn = UOp(Ops.RANGE, dtypes.index, (index_const(_bound(r) // n),), r.arg)
  reds = [u for u in k.toposort() if u.op is Ops.REDUCE and r in u.src[1:]]
  # several reductions over the same loop (SwiGLU's gate and up products of one input) share their loads
  if not reds or any(red.arg not in (Ops.ADD, Ops.MAX) or red.dtype != dtypes.float32 for red in reds): raise CantVectorize
  lanes, repl = _lanes(r, rn, n), {}
  for red in reds:
    val = lanes(red.src[0])
    if val.dtype.count != n: raise CantVectorize
    vred = UOp(Ops.REDUCE, val.dtype, (val, *[rn if x is r else x for x in red.src[1:]]), red.arg)
    parts = [vred.gep(i) for i in range(n)]
    while len(parts) > 1:
      parts = [UOp(red.arg, red.dtype, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    repl[red] = parts[0]
  return _simplify(k.substitute(repl))

# ---- actions: ("VEC", axis, n) | ("VEC_S", axis, n) (lanes stored one by one) | ("UPCAST", axis, n) | ("UPCAST_R", axis, n)
#      | ("SWAP", axis, axis) | ("GROUP", axis, n) (outer loop where axis was, inner n innermost)
#      | ("UPCAST_T", axis, n) (n needn't divide the axis: the last copies clamped, their stores gated); axes are RANGE args
Opt = tuple

class InvalidOpt(ValueError):
  """An optimization action that doesn't fit the kernel: unknown kind, an axis it lacks, or an amount that doesn't divide
  the axis (a hand-written or cached action; applying it anyway would compute the wrong elements)."""

def _range(k: UOp, arg) -> UOp:
  for u in k.toposort():
    if u.op is Ops.RANGE and u.arg == arg: return u
  raise InvalidOpt(f"no range {arg!r} in kernel (it has {sorted(str(u.arg) for u in k.toposort() if u.op is Ops.RANGE)})")

_AXIS_KIND = {"VEC": "g", "VEC_S": "g", "UPCAST": "g", "UPCAST_T": "g", "UPCAST_R": "r", "VEC_R": "r", "UNROLL": "r", "SWAP": "g",
              "GROUP": "g"}

def check_opt(k: UOp, opt) -> tuple[UOp, UOp | int]:
  """(the range `opt` acts on, its amount or second range) after checking that `opt` is well formed and fits `k`:
  a known kind, axes the kernel has of the right kind (output or reduce), and an amount > 1 that divides the axis."""
  if not (isinstance(opt, tuple) and len(opt) == 3 and isinstance(opt[0], str) and opt[0] in _AXIS_KIND):
    raise InvalidOpt(f"unknown opt {opt!r}: expected (kind, axis, amount) with kind one of {', '.join(_AXIS_KIND)}")
  kind, axis, arg = opt
  r = _range(k, axis)
  want = _AXIS_KIND[kind]
  if r.arg[0] != want: raise InvalidOpt(f"opt {opt!r}: {kind} needs {'an output' if want == 'g' else 'a reduce'} axis, {axis!r} is not one")
  if kind == "SWAP":
    r2 = _range(k, arg)
    if r2.arg[0] != "g" or r2 is r: raise InvalidOpt(f"opt {opt!r}: SWAP needs two different output axes")
    return r, r2
  if not isinstance(arg, int) or isinstance(arg, bool) or arg < 2: raise InvalidOpt(f"opt {opt!r}: the amount must be an integer >= 2")
  if kind == "UPCAST_T":
    if (b := _bound(r)) is None or b < arg: raise InvalidOpt(f"opt {opt!r}: axis {axis!r} of size {b} is shorter than the tile")
    return r, arg
  if (b := _bound(r)) is None or b % arg:
    raise InvalidOpt(f"opt {opt!r}: amount {arg} doesn't divide axis {axis!r} of size {b if b is not None else 'symbolic'}")
  return r, arg

def apply_opt(k: UOp, opt: Opt) -> UOp:
  r, arg = check_opt(k, opt)
  kind = opt[0]
  # (shared gates: an action the elementwise heuristic chose for a padded copy replays as it was chosen)
  if kind == "VEC": return vectorize_global(k, r, arg, shared_gates=True)  # type: ignore[arg-type]
  if kind == "VEC_S": return vectorize_global(k, r, arg, scatter=True, shared_gates=True)  # type: ignore[arg-type]
  if kind == "UPCAST": return upcast_global(k, r, arg)  # type: ignore[arg-type]
  if kind == "UPCAST_T": return upcast_global_tail(k, r, arg)  # type: ignore[arg-type]
  if kind == "UPCAST_R": return upcast_reduce(k, r, arg)  # type: ignore[arg-type]
  if kind == "VEC_R": return vectorize_reduce(k, r, arg)  # type: ignore[arg-type]
  if kind == "GROUP": return group_global(k, r, arg)  # type: ignore[arg-type]
  if kind == "UNROLL":
    from tinycore.codegen.opt_gemv import unroll_reduce
    return unroll_reduce(k, r, arg)  # type: ignore[arg-type]
  # SWAP, loop order: the outermost global loop is the one split across threads; swapping changes what stays in cache
  return k.substitute({r: UOp(Ops.RANGE, r.dtype, r.src, arg.arg), arg: UOp(Ops.RANGE, arg.dtype, arg.src, r.arg)})  # type: ignore[dict-item, union-attr]

def group_global(k: UOp, r: UOp, amt: int) -> UOp:
  """Output loop `r` in groups of `amt`: r = outer * amt + inner, the outer loop where `r` was, the inner one innermost
  of the output loops. A matmul's panel loop grouped so: each row tile of the left operand (in L1) meets `amt` panels
  of the right one (in L2) before the next row tile, so the left operand streams from memory once per group of panels
  instead of once per panel."""
  outer = UOp(Ops.RANGE, dtypes.index, (index_const(_bound(r) // amt),), r.arg)
  inner = UOp(Ops.RANGE, dtypes.index, (index_const(amt),), ("g", max(g.arg[1] for g in _globals(k)) + 1))
  return _simplify(k.substitute({r: outer * amt + inner}))

def apply_opts(k: UOp, opts: tuple[Opt, ...]) -> UOp:
  k = merge_reduce_loops(k)
  for o in opts: k = apply_opt(k, o)
  return k

def _globals(k: UOp) -> list[UOp]: return sorted((u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "g"), key=lambda r: r.arg)

def _tile_axes(k: UOp) -> list[UOp]:
  """Output axes worth a vector/upcast tile: unit stride in some streamed load (one a residual or bias read doesn't count:
  in `x + W @ v` the matrix is read along the reduce axis, which wants reduce lanes instead), and some load reused
  across them."""
  return [g for g in reversed(_globals(k)) if _bound(g) and _streamed(k, g) and _reused(k, g)]

def _second_axes(k: UOp, first) -> list[UOp]:
  """Axes for the second tile dim, best first: the one most of the wide loads don't depend on."""
  wide = [ind for ind in _loads(k) if ind.arg is not None or any(g.arg == first for g in ind.toposort() if g.op is Ops.RANGE)]
  cands = [g for g in reversed(_globals(k)) if g.arg != first and _bound(g) and _bound(g) % 4 == 0 and _bound(g) // 4 >= 2 and _reused(k, g)]
  return sorted(cands, key=lambda g: -sum(g not in ind.toposort() for ind in wide))

def _reduce_len(k: UOp) -> int:
  """The kernel's reduce length (a matmul's K: its left operand's rows lie that many elements apart), 0 if symbolic."""
  n = 1
  for u in k.toposort():
    if u.op is Ops.RANGE and u.arg[0] == "r": n *= _bound(u) or 0
  return n

def _row_axes(k: UOp, first, renderer: Renderer) -> list[UOp]:
  """A matmul's second tile axes as _second_axes ranks them, and also those no multiple of 4 divides where the renderer
  has a register tile for them (Renderer.matmul_tile_rows: rows whose last tile is clamped, 197 tokens in tiles of 12)."""
  K = _reduce_len(k)
  wide = [ind for ind in _loads(k) if ind.arg is not None or any(g.arg == first for g in ind.toposort() if g.op is Ops.RANGE)]
  cands = [g for g in reversed(_globals(k)) if g.arg != first and (b := _bound(g)) and _reused(k, g) and
           ((b % 4 == 0 and b // 4 >= 2) or ((t := renderer.matmul_tile_rows(b, K)) and b >= t))]
  return sorted(cands, key=lambda g: -sum(g not in ind.toposort() for ind in wide))

def _pixel_axes(k: UOp, first, blk: tuple[int, int] | None) -> list[UOp]:
  """Row axes for a conv's register block: reused output axes with a divisor from 2 to the block's rows (a 7-, 14- or
  28-wide feature map takes 7, which no multiple of 4 divides), the innermost one taking at least 4 rows first."""
  if blk is None: return []
  def most(g: UOp) -> int: return max((d for d in range(2, blk[0] + 1) if _bound(g) % d == 0), default=0)
  cands = [g for g in reversed(_globals(k)) if g.arg != first and _bound(g) and most(g) and _reused(k, g)]
  return sorted(cands, key=lambda g: most(g) < 4)

def _sharing_axes(k: UOp) -> list[UOp]:
  """Output axes to unroll by 4 so each load of an operand that doesn't vary along them feeds 4 accumulators, the one
  sharing the biggest operand first (a batch of token rows x @ W.T: each W load serves 4 tokens)."""
  glob = [g for g in reversed(_globals(k)) if _bound(g) and _bound(g) % 4 == 0 and _bound(g) // 4 >= 2 and _reused_big(k, g)]
  return sorted(glob, key=lambda g: -max((ind.src[0].dtype.size for ind in _loads(k) if g not in ind.toposort()), default=0))  # type: ignore[attr-defined]

def _vector_axes(k: UOp, renderer: Renderer) -> list[tuple[UOp, bool]]:
  """The tile axes in the order to try, each with whether its stores may scatter lanes. Where the renderer has a register
  block and the first axis takes only half a vector (a conv's 56-wide rows), an axis a whole vector divides goes first
  even if the output isn't contiguous along it: a conv with its weight as (cin, *k, cout) takes 16 output channels per
  vector and writes NCHW lane by lane (256 scalar stores per 8x32 tile of 576-deep reduces) instead of half-width FMAs
  or a channels-last result copied back."""
  axes = [(g, False) for g in _tile_axes(k)]
  if not axes or renderer.register_block is None or not renderer.vector_types or not getenv("VEC", 1): return axes
  if _bound(axes[0][0]) % 16 == 0: return axes
  return [(g, True) for g, _ in axes if _bound(g) % 16 == 0] + axes

def _eligible(k: UOp, renderer: Renderer) -> bool:
  topo = k.toposort()
  # one reduction, or several side by side over the same loops (not one inside another)
  reds = [u for u in topo if u.op is Ops.REDUCE]
  return not renderer.has_local and not getenv("NOUPCAST", 0) and any(u.op is Ops.RANGE and u.arg[0] == "r" for u in topo) \
    and len(reds) >= 1 and all(set(x.src[1:]) == set(reds[0].src[1:]) and not any(y.op is Ops.REDUCE for y in x.src[0].toposort()) for x in reds)

def heuristic_opts(k: UOp, renderer: Renderer) -> tuple[Opt, ...]: return _heuristic(k, renderer)[0]

def _heuristic(k: UOp, renderer: Renderer) -> tuple[tuple[Opt, ...], UOp]:
  """Hand-tuned choice: a vector (or unrolled) tile on a unit-stride output axis, a second axis by 8 or 4 for reuse;
  without an output tile, independent accumulators on the innermost unit-stride reduce. Returns the opts and the
  kernel with them applied."""
  vec = renderer.vector_types and getenv("VEC", 1)
  k = merge_reduce_loops(k)
  if not _eligible(k, renderer):
    from tinycore.codegen.opt_elementwise import elementwise_heuristic
    return elementwise_heuristic(k, renderer)
  # a few activation rows against a weight read once (decode at batch 2..8): its own tile (opt_gemv.py)
  from tinycore.codegen.opt_gemv import gemv_heuristic
  if (gemv := gemv_heuristic(k, renderer)) is not None: return gemv
  for g, scatter in _vector_axes(k, renderer):
    b = _bound(g)
    # a short axis no vector divides (a 10-class head) is unrolled whole
    amt = next((a for a in (16, 8, 4) if b % a == 0), b if b <= 16 else None)
    if amt is None: continue
    first: Opt = ("UPCAST", g.arg, amt)
    if scatter:
      try: k2, first = vectorize_global(k, g, amt, scatter=True), ("VEC_S", g.arg, amt)
      except CantVectorize: continue
    elif vec and amt in (8, 16):
      try: k2, first = vectorize_global(k, g, amt), ("VEC", g.arg, amt)
      except CantVectorize:
        try:
          if amt != 16 or renderer.register_block is None: raise
          k2, first = vectorize_global(k, g, amt, scatter=True), ("VEC_S", g.arg, amt)
        except CantVectorize: k2 = upcast_global(k, g, amt)
    else: k2 = upcast_global(k, g, amt)
    # a conv (lanes stored one by one into NCHW): rows of neighbouring output pixels, not of images (8 images per tile read
    # 8 streams megabytes apart: 16x256x14x14 ran at a quarter of the speed of 7 pixels of one row)
    # (a matmul's rows no multiple of 4 divides (197, 1023) too, where the renderer has a register tile for them that
    # needn't divide them: tiled only along the columns, 197x768 @ 768x3072 ran at 28 GFLOP/s on one core, 108 in 12-row tiles)
    sec = (_pixel_axes(k2, g.arg, renderer.register_block) if first[0] == "VEC_S" else []) or \
      (_row_axes(k2, g.arg, renderer) if first[0] == "VEC" and renderer.register_block is not None else _second_axes(k2, g.arg))
    if not sec:
      # a single output axis (matrix-vector): widen the tile along it, so each row of the streamed operand is read
      # as 4 consecutive vectors (whole cache lines, fewer strided passes)
      left = b // amt   # the tiled range's remaining trip count (a range of 1 was simplified away)
      if first[0] == "VEC" and len(_globals(k2)) > 1 and _globals(k2)[0].arg != g.arg and _streamed(k, g):
        # another output axis outside carries the threads (a row-chunked matrix-vector product, schedule.py): take up to
        # 4096 columns at once, so every row is streamed whole; the accumulators spill to L1, which keeps up with DRAM
        w = max(d for d in range(1, min(left, 4096 // amt) + 1) if left % d == 0)
        if w > 1: return (first, ("UPCAST", g.arg, w)), upcast_global(k2, _range(k2, g.arg), w)
        return (first,), k2
      if left % 4 == 0 and left // 4 >= 8:
        wide = ("UPCAST", g.arg, 4)
        return (first, wide), apply_opt(k2, wide)
      return (first,), k2
    b2 = _bound(sec[0])
    # (a short axis unrolled whole keeps amt scalar accumulators per row: 4 rows of a 10-class head, not 8, whose 80
    # accumulators spilled: one core 118 -> 58 us for 256x512 @ 512x10)
    rows, tile_w = (8 if b2 % 8 == 0 and b2 // 8 >= 2 and (amt in (4, 8, 16) or amt * 8 <= 32) else 4), amt
    lead: tuple[Opt, ...] = (first,)
    clamped = 0
    blk = renderer.register_block if first[0] in ("VEC", "VEC_S") else None
    if blk is not None:
      # the renderer's register block: `cols` columns as several vectors side by side and `rows` rows (fewer where
      # they don't divide), so each broadcast element of the row operand feeds cols/amt FMAs
      # (at least 2 row blocks, unless another axis is outermost to split between threads: a left operand packed in
      # row panels [M/8][K][8] takes its whole 8-row inner axis)
      rows = next((r for r in (blk[0], 8, 4) if r <= blk[0] and b2 % r == 0 and (b2 // r >= 2 or sec[0].arg != _globals(k2)[0].arg)), 4)
      # a matmul's tile rows where the renderer has a better count for this many rows than what divides them (tiling.py:
      # 12 x 32 with AVX-512, or 8 rows where 8 doesn't divide them), the last tile clamped (always UPCAST_T: gcc
      # hoisted the 12 broadcasts of a plain 12-row UPCAST above the FMAs and spilled, 960x1024x1024 at 87 against 102
      # GFLOP/s); a conv's pixel rows (VEC_S) keep the block's
      if first[0] == "VEC" and (tall := renderer.matmul_tile_rows(b2, _reduce_len(k2))) > rows and b2 >= tall: rows = clamped = tall
      # a conv's 7-, 14- or 28-wide feature map: 7 pixel rows
      elif b2 % rows: rows = max(d for d in range(2, blk[0] + 1) if b2 % d == 0)
      if blk[1] > amt and blk[1] % amt == 0 and (b // amt) % (blk[1] // amt) == 0:
        widen = ("UPCAST", g.arg, blk[1] // amt)
        k2, lead, tile_w = apply_opt(k2, widen), (first, widen), blk[1]
    second = ("UPCAST" if b2 % rows == 0 and not clamped else "UPCAST_T", sec[0].arg, rows)
    k3, opts = apply_opt(k2, second), lead + (second,)
    if blk is not None and tile_w < blk[1] and (w3 := blk[1] // 16) >= 2:
      # a vector narrower than the block that its own axis can't widen (a conv's 56-wide rows take 8 lanes): fill the
      # block's registers along a third output axis the other operand doesn't vary with (a conv's output rows: 8 channels
      # x 2 rows x 8 lanes, each weight broadcast feeding 2 FMAs; one core 83 -> 100 GFLOP/s on the bench's conv)
      third = [h for h in _second_axes(k3, g.arg) if h.arg != sec[0].arg and _bound(h) % w3 == 0 and _bound(h) // w3 >= 2]
      if third: k3, opts = apply_opt(k3, ("UPCAST", third[0].arg, w3)), opts + (("UPCAST", third[0].arg, w3),)
    # when the operand streamed along the vector axis outgrows the last-level cache (a 2048^2 matmul's B), put that
    # axis outermost: each thread then keeps one panel of it hot while the other operand streams (measured 38 -> 54
    # GFLOP/s at 2048^3; at 1024^3 the default order is faster)
    # The panel is chosen by the output axes the vector loads depend on: the vector axis itself, or, for an operand
    # packed in panels ([N/16][K][16], split by codegen/split.py), the outer panel axis.
    glob = _globals(k3)
    wide = [ind for ind in _loads(k3) if ind.arg is not None]  # type: ignore[assignment]
    panel = [h for h in glob if h.arg != sec[0].arg and any(h in ind.toposort() for ind in wide)]  # type: ignore[union-attr]
    big = max((ind.src[0].dtype.size * ind.src[0].dtype.base.itemsize for ind in wide), default=0)  # type: ignore[union-attr]
    # (packed panels, where the tile took the whole vector axis, always: one 16-column panel stays in L2 while the
    # other operand streams past it)
    packed = b == tile_w and panel and panel[0].arg != g.arg
    if glob and len(panel) == 1 and glob[0].arg != panel[0].arg and (big > (8 << 20) or packed):
      swap = ("SWAP", glob[0].arg, panel[0].arg)
      k3, opts = apply_opt(k3, swap), opts + (swap,)
      # and packed panels visited in groups by each row tile (Renderer.matmul_panel_group): the panel loop, now
      # outermost, split so that its inner part runs inside the row tiles' loop
      n_panels = _bound(panel[0]) or 1
      if packed and (grp := renderer.matmul_panel_group(big // n_panels, n_panels)) > 1 and n_panels % grp == 0:
        group = ("GROUP", glob[0].arg, grp)
        k3, opts = apply_opt(k3, group), opts + (group,)
    return opts, k3
  reds = [u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "r"]
  for r in reversed(reds):
    b = _bound(r)
    if b and b >= 8 and _unit_stride(k, r) and vec:
      n = 16 if b % 16 == 0 else 8 if b % 8 == 0 else None
      if n:
        try:
          opts, k2 = (("VEC_R", r.arg, n),), vectorize_reduce(k, r, n)
          # and an output axis the vector loads don't all depend on (e.g. output channels of a weight gradient), so
          # each vector load feeds several accumulators
          if glob := _sharing_axes(k2):
            opts, k2 = opts + (("UPCAST", glob[0].arg, 4),), upcast_global(k2, glob[0], 4)
            # both operands contiguous along the reduce (g @ W.T in a backward pass): a 4x4 block of outputs, each of
            # the 8 vector loads feeding 4 FMAs (one core, 256x512x512: 72 -> 112 GFLOP/s against 4 rows alone)
            if len(glob) > 1 and _reused_big(k2, (g2 := _range(k2, glob[1].arg))):
              opts, k2 = opts + (("UPCAST", glob[1].arg, 4),), upcast_global(k2, g2, 4)
            return opts, k2
          # a matrix-vector product (the only load not varying with an output is the vector, in L1 anyway): rows one
          # after another, so a thread's loads are one sequential stream the prefetcher follows (interleaving 4 short
          # rows halved the bandwidth), with independent accumulators to hide the add latency instead
          left = _bound(_range(k2, r.arg))
          if amt := next((a for a in (4, 2) if left and left % a == 0 and left // a >= 4), None):
            return opts + (("UPCAST_R", r.arg, amt),), upcast_reduce(k2, _range(k2, r.arg), amt)
          return opts, k2
        except CantVectorize: pass
    if b and b >= 64 and _unit_stride(k, r):
      amt = next((a for a in (16, 8, 4) if b % a == 0), None)
      if amt: return (("UPCAST_R", r.arg, amt),), upcast_reduce(k, r, amt)
    if b and b <= 16 and len(reds) == 1:
      # a short reduce (the 10-wide gradient of a classifier head) unrolled whole, and 4 rows of an output axis that
      # share the other operand's loads
      opts, k2 = (("UPCAST_R", r.arg, b),), upcast_reduce(k, r, b)
      if glob := _sharing_axes(k2): return opts + (("UPCAST", glob[0].arg, 4),), upcast_global(k2, glob[0], 4)
      # nothing shared (the sum of a matrix-vector product's row chunks): whole vectors along a contiguous output axis,
      # not one scalar per output (1x4096 @ 4096x4096's 8 chunk rows: 9 us scalar on one core)
      return _vector_rows(k2, opts) if vec else (opts, k2)
  # nothing reused, no contiguous reduce: still read and add whole vectors along a contiguous output axis
  return _vector_rows(k, ()) if vec else ((), k)

def _vector_rows(k: UOp, opts: tuple) -> tuple[tuple[Opt, ...], UOp]:
  """`opts` and VEC 16 on the innermost output axis where it is contiguous and 16 divides it; else `opts` alone."""
  glob = _globals(k)
  if not (glob and _bound(glob[-1]) and _bound(glob[-1]) % 16 == 0 and _unit_stride(k, glob[-1])): return opts, k
  try: opts, k2 = opts + (("VEC", glob[-1].arg, 16),), vectorize_global(k, glob[-1], 16)
  except CantVectorize: return opts, k
  # a long reduce down the rows (a bias gradient: 256 rows of 512 columns) added into one vector waits on each add:
  # 4 vectors side by side are 4 independent chains (one core, 256x512 column sum + SGD: 15.6 -> 4.7 us)
  left, reds = _bound(glob[-1]) // 16, [u for u in k.toposort() if u.op is Ops.RANGE and u.arg[0] == "r"]
  if any((_bound(r) or 0) >= 32 for r in reds) and left % 4 == 0 and left // 4 >= 2:
    opts, k2 = opts + (("UPCAST", glob[-1].arg, 4),), upcast_global(k2, _range(k2, glob[-1].arg), 4)
  return opts, k2

def candidate_opts(k: UOp, renderer: Renderer) -> list[tuple[Opt, ...]]:
  """The space BEAM searches: the heuristic's choice, other tile axes/widths/second-axis amounts, and the loop order
  with the vector axis outermost (so its panel of the other operand stays in cache)."""
  cands: list[tuple[Opt, ...]] = [(), heuristic_opts(k, renderer)]
  if not _eligible(k, renderer): return cands
  vec = renderer.vector_types
  for g in _tile_axes(k)[:2]:
    for amt in (16, 8):
      if _bound(g) % amt: continue
      try: k2, first = (vectorize_global(k, g, amt), ("VEC", g.arg, amt)) if vec else (upcast_global(k, g, amt), ("UPCAST", g.arg, amt))
      except CantVectorize: k2, first = upcast_global(k, g, amt), ("UPCAST", g.arg, amt)
      cands.append((first,))
      for sec in _second_axes(k2, g.arg)[:2]:
        for amt2 in (2, 4, 8):
          if _bound(sec) % amt2 or _bound(sec) // amt2 < 2: continue
          cands.append((first, ("UPCAST", sec.arg, amt2)))
          glob = _globals(k2)
          if glob and glob[0].arg != g.arg: cands.append((first, ("UPCAST", sec.arg, amt2), ("SWAP", glob[0].arg, g.arg)))
  return list(dict.fromkeys(cands))

def optimize(k: UOp, renderer: Renderer, opts: tuple[Opt, ...] | None = None) -> UOp:
  from tinycore.codegen.opt_smem import is_gemm, check_gemm_actions, smem_gemm
  if is_gemm(opts):   # a shared-memory GEMM tile (BEAM's choice for a GPU tensor-core matmul)
    if (g := smem_gemm(k, renderer, check_gemm_actions(k, renderer, opts))) is None: raise InvalidOpt("shared-memory GEMMs are off (SMEM_GEMM=0)")
    return g
  # GPUs (thread indices): register tiles + workgroup shape live in opt_gpu.py; it maps the output loops to threads itself
  if opts is None and renderer.has_local:
    from tinycore.codegen.opt_gpu import optimize_gpu
    return optimize_gpu(k, renderer)
  chosen, k = _heuristic(k, renderer) if opts is None else (opts, apply_opts(k, opts))
  if (rec := viz.recorder) is not None: rec.note_opts(chosen)
  if any(o[0] == "VEC_S" for o in chosen):   # lanes stored one by one: runs of them into vector stores (a transpose)
    from tinycore.codegen.lane_stores import group_lane_stores
    k = group_lane_stores(k)
  return k
