"""Lowering a kernel from tensor-level ops to explicit ranges and index math.

A kernel AST is `SINK(value)` over DEFINE_GLOBAL placeholders with movement, ALU and REDUCE_AXIS ops on top. Each output
element gets one index per dimension (RANGEs); movement ops are pushed through as integer arithmetic on those indices
and a validity condition (for PAD), so a reshape-permute-pad chain costs index math, never a copy."""
from __future__ import annotations
from tinycore.uop import UOp, Ops, GroupOp, index_const, ssimplify
from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.codegen.linearize import reduce_identity


def _strides(shape) -> list:
  st, acc = [], 1
  for s in reversed(shape): st.append(acc if s != 1 else 0); acc = acc * s
  return list(reversed(st))

def linear_index(idx: tuple[UOp, ...], shape) -> UOp:
  ret = index_const(0)
  for i, st in zip(idx, _strides(shape)):
    if st != 0: ret = ret + (i * st if not (isinstance(st, int) and st == 1) else i)
  return ret

def _same_size(a, b) -> bool:
  a, b = ssimplify(a), ssimplify(b)
  return a is b if isinstance(a, UOp) or isinstance(b, UOp) else a == b

def _is_one(s) -> bool: return isinstance(s, int) and s == 1

def _match_groups(idx, old, new, ni: list, oj: list, out: list) -> None:
  """Int dims `ni` of new and `oj` of old (equal products) matched in groups of equal product: fills out[oj]."""
  a = b = 0
  while a < len(ni) and b < len(oj):
    gi, pi, gj, pj = [ni[a]], new[ni[a]], [oj[b]], old[oj[b]]
    a, b = a + 1, b + 1
    while pi != pj:
      if pi < pj: gi.append(ni[a]); pi *= new[ni[a]]; a += 1
      else: gj.append(oj[b]); pj *= old[oj[b]]; b += 1
    lin = linear_index(tuple(idx[k] for k in gi), tuple(new[k] for k in gi))
    for n, (k, st) in enumerate(zip(gj, _strides([old[k] for k in gj]))):
      v = lin // st if st != 1 else lin
      out[k] = v % old[k] if n != 0 else v

def _reshape_index(idx: tuple[UOp, ...], old: tuple, new: tuple) -> tuple[UOp, ...]:
  """Indices into `old` from indices into `new` (same element count). Non-1 dims are matched in groups of equal
  product, so div/mod only appears where dimensions really split or merge."""
  out = [index_const(0)] * len(old)
  # no elements (a 0 among the dims): nothing is ever read, and grouping equal products would run off the end
  # ((0, 0, 1, 2) -> (0, 1, 2): 0 == 0 closes the first group, the second 0 has no partner)
  if any(isinstance(s, int) and s == 0 for s in old): return tuple(out)
  if len([s for s in old if not (isinstance(s, int) and s == 1)]) <= 1:   # a flat source (every buffer): just the linear index
    if not any(not (isinstance(s, int) and s == 1) for s in old): return tuple(out)
    return tuple(linear_index(idx, new) if not (isinstance(s, int) and s == 1) else index_const(0) for s in old)
  ni, oj = [k for k, s in enumerate(new) if not _is_one(s)], [k for k, s in enumerate(old) if not _is_one(s)]
  if all(isinstance(s, int) for s in old + new):
    _match_groups(idx, old, new, ni, oj, out)
    return tuple(out)
  # symbolic dims stay whole (splitting one would need div/mod by a Variable): they must pair up in order, and the int
  # dims between two of them are matched in groups like a concrete reshape
  ns, os_ = [k for k in ni if not isinstance(new[k], int)], [k for k in oj if not isinstance(old[k], int)]
  if len(ns) == len(os_) and all(_same_size(old[a], new[b]) for a, b in zip(os_, ns)):
    cut_new, cut_old = [-1] + ns + [len(new)], [-1] + os_ + [len(old)]
    segs = [([i for i in ni if cut_new[k] < i < cut_new[k + 1]], [j for j in oj if cut_old[k] < j < cut_old[k + 1]])
            for k in range(len(cut_new) - 1)]
    if all(prod([new[i] for i in sn]) == prod([old[j] for j in so]) for sn, so in segs):
      for a, b in zip(os_, ns): out[a] = idx[b]
      for sn, so in segs: _match_groups(idx, old, new, sn, so, out)
      return tuple(out)
  # a symbolic dim merged with others ((2, seq) -> (2*seq,)): the linear index unravelled, div/mod by the Variable
  lin = linear_index(idx, new)
  for k, st in zip(oj, _strides([old[k] for k in oj])):
    v = lin // st if not (isinstance(st, int) and st == 1) else lin
    out[k] = v % old[k] if k != oj[0] else v
  return tuple(out)

_Key = tuple   # (node, index per dim, validity or None): one value to emit

class Lowerer:
  """Emits the value of a tensor-level node at an index. Iterative (an explicit stack of (node, index, valid) keys):
  one kernel can be a chain of thousands of elementwise ops, deeper than Python's recursion limit."""
  def __init__(self):
    self.memo: dict[_Key, UOp] = {}
    self.n_reduce = 0
  def emit(self, u: UOp, idx: tuple[UOp, ...], valid: UOp | None) -> UOp:
    root: _Key = (u, idx, valid)
    memo = self.memo
    # key -> (the keys it needs, how to build it from their values): made once per key (a reduce numbers its ranges)
    plans: dict[_Key, tuple[tuple[_Key, ...], object]] = {}
    stack = [root]
    while stack:
      key = stack[-1]
      if key in memo:
        stack.pop()
        continue
      if (plan := plans.get(key)) is None: plan = plans[key] = self._plan(*key)
      needs, build = plan
      ready = True
      for k in reversed(needs):   # the first source is done first, as recursion would (reduces number their ranges in that order)
        if k not in memo:
          stack.append(k)
          ready = False
      if not ready: continue
      stack.pop()
      memo[key] = build if isinstance(build, UOp) else build(*[memo[k] for k in needs])   # type: ignore[operator]
    return memo[root]

  def _plan(self, u: UOp, idx: tuple[UOp, ...], valid: UOp | None) -> tuple[tuple[_Key, ...], object]:
    """What `u` at `idx` needs (keys of other values) and how it is built from them: a function of their values, or
    the UOp itself when it needs nothing."""
    op = u.op
    if op is Ops.DEFINE_GLOBAL:
      ind = u.index(idx[0], valid) if valid is not None else u.index(idx[0])
      return (), UOp(Ops.LOAD, u.dtype.base, (ind,))
    if op is Ops.CONST: return (), UOp.const(u.dtype, u.arg)
    if op is Ops.BIND or op is Ops.DEFINE_VAR:
      var = u.src[0] if op is Ops.BIND else u
      return (), var if u.dtype == dtypes.index else var.cast(u.dtype)
    s = u.src[0] if u.src else None
    same = _same   # a movement op is its source's value at other indices
    if op is Ops.RESHAPE:
      while s.op is Ops.RESHAPE: s = s.src[0]   # reshapes compose: go straight to the first one's source
      # a Variable used as a value is a scalar (its kernel-level node has no shape)
      return ((s, _reshape_index(idx, s.shape if s.shape is not None else (), u.shape), valid),), same
    if op is Ops.PERMUTE:
      nidx: list = [None] * len(idx)
      for out_i, src_i in enumerate(u.arg): nidx[src_i] = idx[out_i]
      return ((s, tuple(nidx), valid),), same
    if op is Ops.EXPAND:
      # a broadcast dim (size 1 in the source) reads index 0
      bidx = tuple(index_const(0) if (isinstance(ss, int) and ss == 1) and ns is not ss else i for i, ss, ns in zip(idx, s.shape, u.shape))
      return ((s, bidx, valid),), same
    if op is Ops.SHRINK: return ((s, tuple(i + b if b != 0 else i for i, (b, _) in zip(idx, u.arg)), valid),), same
    if op is Ops.FLIP: return ((s, tuple((ss - 1) - i if f else i for i, ss, f in zip(idx, s.shape, u.arg)), valid),), same
    if op is Ops.PAD:
      conds: list[UOp] = []
      nidx = []
      for i, (b, e), ss in zip(idx, u.arg, s.shape):
        if isinstance(b, int) and isinstance(e, int) and b == 0 and e == 0: nidx.append(i); continue
        ni = i - b if b != 0 else i
        # a symbolic pad (a concat along a dynamic axis) may be 0 at run time: its condition then always holds
        if not isinstance(b, int) or b > 0: conds.append((index_const(b - 1) if isinstance(b, int) else b - 1).lt(i))
        if not isinstance(e, int) or e > 0: conds.append(ni.lt(ss))
        nidx.append(ni)
      cond = conds[0]
      for c in conds[1:]: cond = cond & c
      inner_valid = cond if valid is None else (valid & cond)
      return ((s, tuple(nidx), inner_valid),), lambda val: UOp(Ops.WHERE, u.dtype, (cond, val, UOp.const(u.dtype, 0)))
    if op is Ops.REDUCE_AXIS:
      rop, axes = u.arg
      # an empty reduce is its identity: nothing of the source is read (its loads would touch a zero-size buffer)
      if any(isinstance(s.shape[a], int) and s.shape[a] == 0 for a in axes):
        return (), UOp.const(u.dtype, reduce_identity(rop, u.dtype))
      nidx = list(idx)
      rngs = []
      for a in axes:
        r = UOp(Ops.RANGE, dtypes.index, (index_const(s.shape[a]),), ("r", self.n_reduce, a))
        rngs.append(r); nidx[a] = r
      self.n_reduce += 1
      return ((s, tuple(nidx), valid),), lambda val: UOp(Ops.REDUCE, u.dtype, (val, *rngs), rop)
    if op in GroupOp.Elementwise:
      return tuple((x, idx, valid) for x in u.src), lambda *vals: UOp(op, u.dtype, vals, u.arg)
    if op in (Ops.CONTIGUOUS, Ops.DETACH): return ((s, idx, valid),), same
    raise NotImplementedError(f"can't lower {op} inside a kernel")

def _same(val: UOp) -> UOp: return val

def lower_kernel(ast: UOp) -> UOp:
  """SINK(value) with DEFINE_GLOBAL(0) as the output -> SINK(STORE(INDEX(out, i), value)) over global RANGEs."""
  root = ast.src[0]
  shape = root.shape
  rngs = tuple(UOp(Ops.RANGE, dtypes.index, (index_const(s),), ("g", i)) if not (isinstance(s, int) and s == 1) else index_const(0)
               for i, s in enumerate(shape))
  lw = Lowerer()
  val = lw.emit(root, rngs, None)
  if len(ast.src) > 1:
    # assign into a view of the output (e.g. one row of a cache): the view's index math places each element
    ld = lw.emit(ast.src[1], rngs, None)
    if ld.op is not Ops.LOAD: raise NotImplementedError("assign target view must be made of reshape/permute/shrink/flip")
    return UOp(Ops.SINK, dtypes.void, (UOp(Ops.STORE, dtypes.void, (ld.src[0], val)),), ast.arg)
  out = UOp(Ops.DEFINE_GLOBAL, root.dtype.base.ptr(prod(s if isinstance(s, int) else int(s.vmax) for s in shape)), (), 0)
  return UOp(Ops.SINK, dtypes.void, (out.index(linear_index(rngs, shape)).store(val),), ast.arg)
