"""The scheduler: which nodes of a lazy graph become buffers, and the ordered kernels and copies that compute them.

Elementwise chains, movement ops and reductions fuse into one kernel. A node gets its own buffer only when it must:
it was asked for, it is contiguous()/a copy/an assign, or it is a reduction whose result would otherwise be recomputed
(it is broadcast back over the axes it reduced, it sits inside another reduction, or two kernels use it). Where all the
kernels reading a reduction apply the same elementwise math to it first (bias + relu), the buffer holds that result
instead (epilogue.py), and kernels that read a buffer's old contents run before an assign overwrites it
(assign_order.py)."""
from __future__ import annotations
import functools
from dataclasses import dataclass, field
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.dtype import dtypes
from tinycore.device import Buffer
from tinycore.helpers import DEBUG, prod, all_int, ContextVar

from tinycore.engine.blocked_sum import blocked_float_sum
from tinycore.engine.epilogue import epilogue_end, users_of
from tinycore.engine.assign_order import assign_order, reading_copies
from tinycore.engine.ragged_matvec import split_ragged_matvec
from tinycore.engine.operand_strides import operand_reads
from tinycore.codegen.opt_gemv import STREAM_ROWS
PREPAD = ContextVar("PREPAD", 1)

@dataclass
class ScheduleItem:
  ast: UOp                                  # SINK(value) over DEFINE_GLOBAL placeholders, or COPY
  bufs: list[Buffer]                        # output first, then inputs in DEFINE_GLOBAL order
  var_vals: dict[UOp, int] = field(default_factory=dict)
  @property
  def is_copy(self) -> bool: return self.ast.op is Ops.COPY
  def lower(self):
    from tinycore.engine.run import lower_item
    return lower_item(self)
  def __repr__(self): return f"<ScheduleItem {'copy' if self.is_copy else 'kernel'} out={self.bufs[0]} ins={len(self.bufs) - 1}>"

def _is_view_of_buffer(u: UOp) -> bool:
  """A node that already lives in memory as a contiguous buffer (possibly reshaped)."""
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u.op is Ops.BUFFER

def _reshaped_contiguous(u: UOp) -> bool:
  """A reshape of a CONTIGUOUS node: the node gets its own buffer anyway, and the target is that buffer reshaped (no
  second kernel copying it into the new shape; conv_winograd.py's output, written as (bs, cout, th, m, tw, m))."""
  if u.op is not Ops.RESHAPE: return False
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u.op is Ops.CONTIGUOUS

def _is_movement_of_buffer(u: UOp) -> bool: return u.base.op is Ops.BUFFER

EXPAND_COST = 12   # ALU ops above which broadcast elementwise work is realized rather than recomputed
def _alu_cost(u: UOp, realize: set, limit: int = EXPAND_COST) -> int:
  """ALU ops per element in the kernel-local graph of `u` (not crossing buffers, realized nodes or reductions), counted
  up to `limit`; transcendentals and divisions count 4. Work behind a broadcast (a norm's scale) is done once per
  broadcast value, so it isn't counted."""
  seen, stack, cost = set(), [u], 0
  while stack and cost < limit:
    n = stack.pop()
    if n in seen or n.op in (Ops.BUFFER, Ops.REDUCE_AXIS) or (n is not u and n in realize): continue
    if n.op is Ops.EXPAND and _really_expands(n): continue
    seen.add(n)
    # math on broadcast values only (softmax's 1/sum, taken after the expand) is hoisted out of the inner loops too
    if n.op in GroupOp.ALU and not all(_broadcast(x) for x in n.src):
      cost += 4 if n.op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.FDIV, Ops.RECIP) else 1
    stack.extend(n.src)
  return cost

def _input_bytes(u: UOp, realize: set) -> int:
  """Bytes of the buffers (and realized nodes) the kernel-local graph of `u` reads."""
  seen, stack, total = set(), [u], 0
  while stack:
    n = stack.pop()
    if n in seen: continue
    seen.add(n)
    if n.op is Ops.BUFFER: total += getattr(n.arg, "nbytes", 0); continue
    if n is not u and (n in realize or n.op is Ops.REDUCE_AXIS):
      total += prod(n.shape) * n.dtype.itemsize if all_int(n.shape) else 0; continue
    stack.extend(n.src)
  return total

def _decompresses(u: UOp, realize: set) -> bool:
  """`u` writes at least twice the bytes it reads (quantized weights decoded to float): realizing it would multiply the
  memory it holds and the traffic of every reader, so it is recomputed where it is read instead."""
  return all_int(u.shape) and 2 * _input_bytes(u, realize) <= prod(u.shape) * u.dtype.itemsize

def _broadcast(u: UOp) -> bool:
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u.op is Ops.CONST or (u.op is Ops.EXPAND and _really_expands(u))

def _really_expands(u: UOp) -> bool: return any(s != n for s, n in zip(u.src[0].shape, u.shape))

def _find_realizes(targets: list[UOp], topo: list[UOp]) -> set[UOp]:
  realize: set[UOp] = {t for t in targets if not _is_view_of_buffer(t) and t.op is not Ops.CONST and not _reshaped_contiguous(t)}
  for u in topo:
    if u.op in (Ops.CONTIGUOUS, Ops.ASSIGN): realize.add(u)
    if u.op is Ops.CUSTOM and hasattr(u.arg, "out_shape"):
      # a fused kernel (codegen/attention.py) reads its inputs as contiguous buffers: anything else is computed first
      realize.add(u)
      realize.update(s for s in u.src if not _is_view_of_buffer(s))
    if u.op is Ops.COPY:
      realize.add(u)
      if not _is_view_of_buffer(u.src[0]): realize.add(u.src[0])
  # each root's kernel-local walk, kept between passes: a pass walks again only the roots that saw a node realized
  # since (their kernel now stops there) and the new roots
  walks: dict[UOp, tuple[set, set, set]] = {}
  dirty = set(realize)
  while True:
    for root in dirty: walks[root] = _walk_root(root, realize)
    readers: dict[UOp, UOp] = {}
    new: set[UOp] = set()
    for root, (_, reduces, must) in walks.items():
      new |= must
      # a reduction two kernels read is computed once, into a buffer
      for n in reduces:
        if readers.setdefault(n, root) is not root: new.add(n)
    if not (new - realize):
      # (no pass after it: a moved reduction is now read only by its epilogue's kernel, and nothing else changed)
      _realize_epilogues(realize, targets, topo)
      return realize
    # a node realized in this pass cuts the paths through it, and the pass judged each reduction by those paths (a
    # matmul seen from the kernels that read relu(matmul) before relu itself was realized): decide the reductions again
    # once the other new buffers are in place, so the matmul stays fused into the one kernel that now reads it
    added = {n for n in new - realize if n.op is not Ops.REDUCE_AXIS} or (new - realize)
    realize |= added
    dirty = added | {root for root, (seen, _, _) in walks.items() if not seen.isdisjoint(added)}

def _walk_root(root: UOp, realize: set) -> tuple[set, set, set]:
  """The kernel-local graph of `root`: (nodes walked, reductions it reads plainly, nodes it needs realized)."""
  reduces: set[UOp] = set()
  must: set[UOp] = set()
  seen: set[UOp] = set()
  stack = [(root, False, False, True)]
  visited = set()
  while stack:
    n, expanded, in_reduce, is_root = stack.pop()
    if (n, expanded, in_reduce) in visited: continue
    visited.add((n, expanded, in_reduce))
    seen.add(n)
    if not is_root and (n in realize or n.op is Ops.BUFFER): continue
    if n.op is Ops.SHRINK and not in_reduce and (p := _shrunk_product(n)) is not None and p not in realize:
      must.add(p); seen.add(p); continue
    if n.op is Ops.REDUCE_AXIS and not is_root:
      if expanded or in_reduce: must.add(n); continue
      reduces.add(n)   # walked on: if no other kernel reads it, it is part of this one
    # a padded input read through a sliding window (conv, pooling) is cheaper padded once, in memory: the window
    # kernel then has no per-element bounds checks and its loads vectorize
    if n.op is Ops.PAD and expanded and in_reduce and _is_movement_of_buffer(n.src[0]) and PREPAD and _prepads(n.device):
      must.add(n); continue
    # costly elementwise work broadcast into a reduction (gelu(h) @ w, softmax(s) @ v) would be recomputed for
    # every output it is broadcast over: compute it once into a buffer instead. A register tile shares each value
    # across ~16 outputs, so the recompute factor is the broadcast over 16 (softmax @ v with 64-wide heads: 4x).
    if n.op is Ops.EXPAND and in_reduce and _really_expands(n):
      b = n.src[0]
      while b.op in GroupOp.Movement: b = b.src[0]
      fan = prod(n.shape) // max(prod(n.src[0].shape), 1) if all_int(n.shape) and all_int(n.src[0].shape) else 16
      if b not in realize and b.op in GroupOp.ALU and _alu_cost(b, realize) * max(1, fan // 16) >= EXPAND_COST and not _decompresses(b, realize):
        must.add(b); seen.add(b); continue
    e = expanded or (n.op is Ops.EXPAND and _really_expands(n))
    r = in_reduce or n.op is Ops.REDUCE_AXIS
    src = n.src[1:] if n.op is Ops.ASSIGN else n.src
    stack.extend((s, e, r, False) for s in src)
  return seen, reduces, must

def _shrunk_product(n: UOp) -> UOp | None:
  """The matrix product this SHRINK keeps most of, read through reshapes and permutes, when it should be computed
  whole into a buffer first: pushed into the product's kernel, a slice of the columns ((a @ b)[:, :1000]) leaves
  ragged tiles over the packed panels of b (a scalar dot product per output, 60x slower at 1024^3 on a CPU). A slice
  that keeps under half of a product, or a small product, still fuses: computing the rest would cost more."""
  r = n.src[0]
  while r.op in (Ops.RESHAPE, Ops.PERMUTE): r = r.src[0]
  if r.op is not Ops.REDUCE_AXIS or r.arg[0] is not Ops.ADD: return None
  x = r.src[0].src[0] if r.src[0].op is Ops.CAST else r.src[0]
  if x.op is not Ops.MUL or not all_int(x.shape) or not all_int(n.shape) or not all_int(n.src[0].shape): return None
  if prod(x.shape) < (1 << 22) or 2 * prod(n.shape) < prod(n.src[0].shape): return None
  return r

def _realize_epilogues(realize: set, targets: list[UOp], topo: list[UOp]) -> bool:
  """Move each reduction's buffer to the end of the elementwise math all its readers apply (engine/epilogue.py)."""
  reds = [u for u in realize if u.op is Ops.REDUCE_AXIS and u not in targets]
  if not reds: return False
  users, order, moved = users_of(topo), {u: i for i, u in enumerate(topo)}, False
  for r in reds:
    if (e := epilogue_end(r, users, order, realize)) is not None:
      realize.discard(r); realize.add(e); moved = True
  return moved

def _streams_across(r: UOp) -> bool:
  """`r` reads a buffer as big as its whole input once (a matrix-vector product: no reuse between outputs) with unit
  stride along an output axis, not the reduced one (vector @ matrix, the matrix row-major). Decided from the views of
  the kernel-local input alone (operand_strides.py): the scheduler asks this of every long reduction of a graph."""
  src, axes = r.src[0], r.arg[1]
  if (got := operand_reads(src)) is None: return False
  # (a few rows of activations may share it: decode at batch 2..8 still streams the weight once, see opt_gemv.py)
  for rd in got.reads:
    if rd.strides is None or rd.size * STREAM_ROWS < prod(src.shape): continue
    unit = [i for i, (s, st) in enumerate(zip(src.shape, rd.strides)) if st == 1 and s > 1]
    if any(i not in axes for i in unit) and not any(i in axes for i in unit): return True
  return False

def _split_reduce(r: UOp) -> UOp | None:
  """A long reduction into few outputs runs on one core: split it in two stages (chunks, then the chunk results) so the
  first stage has a parallel axis. Results are deterministic: the split doesn't depend on the thread count."""
  src, (op, axes) = r.src[0], r.arg
  if not all_int(src.shape): return None
  # a matrix-vector product with a size no vector width divides: an aligned main part and a thin tail (ragged_matvec.py)
  if (ragged := split_ragged_matvec(r, _has_local(r.device))) is not None: return ragged
  rsize, osize = prod(src.shape[a] for a in axes), prod(r.shape)
  # vector @ row-major matrix on a CPU: split the rows into chunks, each (a thread's share) streaming whole rows into
  # a row of partial sums; reading column panels instead strides 4*N bytes per row and runs at half the bandwidth.
  # Chunks are 64-512 rows (the fewer, the less left to sum), so the first stage (rsize <= 512) is never split again
  ln = next((c for c in (512, 256, 128, 64) if rsize % c == 0 and rsize // c >= 4), None)
  if ln is not None and osize >= 8 and rsize >= 1024 and not _has_local(r.device) and _streams_across(r):
    keep = [i for i in range(len(src.shape)) if i not in axes]
    x = src.permute(tuple(axes) + tuple(keep)).reshape((rsize // ln, ln) + tuple(src.shape[i] for i in keep))
    part = UOp(Ops.CONTIGUOUS, r.dtype, (x.r(op, (1,)),))
    return part.r(op, (0,)).reshape(r.shape)
  # a long float sum is summed in blocks for accuracy (and its first stage has many outputs: parallel as well)
  if (blocked := blocked_float_sum(r, _has_local(r.device))) is not None: return blocked
  if rsize < 32768 or osize >= 8: return None   # the first stage has >= 8 outputs, so it is never split again
  chunks = next((p for p in (32, 16, 8) if rsize % p == 0), None)
  if chunks is None: return None
  if _has_local(r.device):
    # a GPU wants many short reductions, not 32 threads looping over millions (lavapipe even miscomputes such loops)
    chunks = next((p for p in (1 << i for i in range(16, 2, -1)) if rsize % p == 0 and rsize // p >= 256), chunks)
  keep = [i for i in range(len(src.shape)) if i not in axes]
  x = src.permute(tuple(keep) + tuple(axes)).reshape(tuple(src.shape[i] for i in keep) + (chunks, rsize // chunks))
  part = UOp(Ops.CONTIGUOUS, r.dtype, (x.r(op, (len(keep) + 1,)),))
  return part.r(op, (len(keep),)).reshape(r.shape)

def _prepads(device) -> bool:
  """The device's renderer wants sliding-window inputs padded in memory first (Renderer.prepad_windows)."""
  from tinycore.device import Device
  try: return not isinstance(device, str) or bool(getattr(Device[device].renderer, "prepad_windows", True))
  except Exception: return True

def _has_local(device) -> bool:
  from tinycore.device import Device
  try: return isinstance(device, str) and bool(Device[device].renderer.has_local)
  except Exception: return False

@functools.cache
def _pm_split():
  # built once: a PatternMatcher compiles its rules (inspect.signature per rule), ~0.3 ms that every realize paid
  from tinycore.rewrite import PatternMatcher, UPat
  return PatternMatcher([(UPat(Ops.REDUCE_AXIS, name="r"), _split_reduce)])

def create_schedule(targets: list[UOp], return_outputs: bool = False):
  from tinycore.rewrite import graph_rewrite
  sink = UOp(Ops.SINK, dtypes.void, tuple(targets))
  sink = graph_rewrite(sink, _pm_split())
  targets = list(sink.src)
  topo = sink.toposort()
  realize = _find_realizes(targets, topo)
  buf_of: dict[UOp, UOp] = {}          # realized node -> BUFFER uop (reshaped to the node's shape)
  items: list[ScheduleItem] = []
  order, stale = assign_order(topo, realize)
  # old contents a kernel needs next to an assign's new ones: copied before anything runs, read from the copy
  snaps = {b: _kernel_item(UOp(Ops.CONTIGUOUS, b.dtype, (b,)), Buffer(b.arg.device, b.arg.size, b.dtype), buf_of, items)
           for b in dict.fromkeys(b for bs in stale.values() for b in bs)}
  for u in order:
    if u.op is Ops.ASSIGN:
      target = u.src[0]
      if target.base.op is not Ops.BUFFER: raise RuntimeError("scheduler bug: assign target is not a buffer view")
      if any(n.op in (Ops.EXPAND, Ops.PAD) for n in target.toposort()):
        raise ValueError(f"can't assign into a broadcast or padded view (target shape {target.shape})")
      out_buf = target.base.arg
      value = u.src[1]
      # reading the target through a different view while writing it would race: compute into a fresh buffer first
      if _reads_shifted(value, target.base, buf_of):
        tmp = _kernel_item(value, Buffer(value.device, value.size, value.dtype), buf_of, items)  # type: ignore[arg-type]
        value = tmp
      _kernel_item(value, out_buf, buf_of, items, out_node=u, store_view=None if _is_view_of_buffer(target) else target)
      buf_of[u] = target
      continue
    out = Buffer(u.device, _max_size(u), u.dtype) if u.op is not Ops.ASSIGN else None  # type: ignore[arg-type]
    if u.op is Ops.COPY:
      src = buf_of.get(u.src[0], u.src[0])
      sb = src.base.arg
      if u.size: items.append(ScheduleItem(UOp(Ops.COPY, u.dtype, (), (sb.device, u.device)), [out, sb]))
      buf_of[u] = UOp(Ops.BUFFER, u.dtype, (), out).reshape(u.shape)
      continue
    if u in stale: _kernel_item(reading_copies(u, {b: snaps[b] for b in stale[u]}, realize), out, buf_of, items, out_node=u)
    else: _kernel_item(u, out, buf_of, items, out_node=u)
  if DEBUG >= 3:
    for i, it in enumerate(items): print(f"schedule {i}: {it}")
  if not return_outputs: return items
  outs = [buf_of[_reshape_src(t)].reshape(t.shape) if t not in buf_of and _reshaped_contiguous(t) else buf_of.get(t, t) for t in targets]
  return items, outs

def _reshape_src(u: UOp) -> UOp:
  while u.op is Ops.RESHAPE: u = u.src[0]
  return u

def _max_size(u: UOp) -> int:
  """Elements a buffer for `u` needs: symbolic dimensions take their largest value."""
  return prod(s if isinstance(s, int) else int(s.vmax) for s in u.shape)

def _unbind_arg(arg, var_vals: dict):
  """Movement args may hold bound Variables: kernels see the Variable, the value travels in var_vals."""
  if isinstance(arg, tuple): return tuple(_unbind_arg(a, var_vals) for a in arg)
  if isinstance(arg, UOp):
    binds = {b: b.src[0] for b in arg.toposort() if b.op is Ops.BIND}
    for b in binds: var_vals[b.src[0]] = b.src[1].arg
    return arg.substitute(binds) if binds else arg
  return arg

def _reads_shifted(value: UOp, buf: UOp, done: dict) -> bool:
  """`value`'s kernel reads `buf` through a view that moves elements (anything but a reshape), so element i may read
  j != i. Nodes already computed by earlier kernels (`done`, e.g. the forward pass an SGD update's gradient came from)
  are read from their own buffers, so what they read doesn't count."""
  seen, stack = set(), [(value, False)]
  while stack:
    n, shifted = stack.pop()
    if (n, shifted) in seen or (n is not value and n in done): continue
    seen.add((n, shifted))
    if n is buf:
      if shifted: return True
      continue
    s = shifted or (n.op in GroupOp.Movement and n.op is not Ops.RESHAPE)
    stack.extend((x, s) for x in n.src)
  return False

def _kernel_item(u: UOp, out: Buffer, buf_of: dict, items: list, out_node: UOp | None = None, store_view: UOp | None = None) -> UOp:
  """Schedule one kernel computing `u` into `out` (or into the view `store_view` of it); returns the BUFFER view that
  now holds it."""
  out_uop = UOp(Ops.BUFFER, u.dtype, (), out).reshape(u.shape)
  if out_node is not None: buf_of[out_node] = out_uop
  if all_int(u.shape) and u.size == 0: return out_uop
  # the kernel's graph: realized sources become loads, buffers become numbered placeholders
  bufs: list = [out]
  # the output is placeholder 0; a kernel that also reads it (in-place update) reads through that same pointer
  gl: dict[Buffer, UOp] = {out: UOp(Ops.DEFINE_GLOBAL, out.dtype.ptr(out.size), (), 0)}
  var_vals: dict[UOp, int] = {}
  memo: dict[UOp, UOp] = {}
  def leaf(n: UOp) -> UOp | None:
    if n.op is Ops.BUFFER:
      b = n.arg
      if b not in gl:
        gl[b] = UOp(Ops.DEFINE_GLOBAL, n.dtype.ptr(b.size), (), len(bufs))
        bufs.append(b)
      return gl[b]
    if n.op is Ops.BIND:
      var, val = n.unbind()
      var_vals[var] = val
      return var
    if n.op is Ops.COPY or n.op is Ops.ASSIGN: raise RuntimeError(f"scheduler bug: unrealized {n.op} inside a kernel")
    return None
  def build(start: UOp, root=False) -> UOp:
    # an explicit stack, not recursion: a chain of thousands of elementwise ops is one kernel, deeper than Python's stack
    stack: list[tuple[UOp, bool, bool]] = [(start, root, False)]
    while stack:
      n, is_root, ready = stack.pop()
      if n in memo: continue
      if not is_root and n in buf_of:   # computed by an earlier kernel: read its buffer
        if (t := buf_of[n]) in memo: memo[n] = memo[t]
        else: stack += [(n, False, False), (t, False, False)]
        continue
      if (r := leaf(n)) is not None: memo[n] = r
      elif ready: memo[n] = n.replace(src=tuple(memo[x] for x in n.src), arg=_unbind_arg(n.arg, var_vals) if n.op in GroupOp.Movement else n.arg)
      else: stack += [(n, is_root, True)] + [(x, False, False) for x in reversed(n.src) if x not in memo]
    return memo[start]
  # contiguous(x) copies x, which may itself be realized (an assign, another contiguous): then it's a load of it
  body = build(u.src[0]) if u.op is Ops.CONTIGUOUS else build(u, root=True)
  if body.op is Ops.CONTIGUOUS: body = body.src[0]
  ast = UOp(Ops.SINK, dtypes.void, (body,) if store_view is None else (body, build(store_view)))
  items.append(ScheduleItem(ast, bufs, var_vals))
  return out_uop
