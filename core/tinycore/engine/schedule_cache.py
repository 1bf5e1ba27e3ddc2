"""The eager schedule cache: a graph whose *structure* was realized before skips scheduling, lowering and runner lookups.

Eager code builds the same graph again and again (a training loop, `((a+1)*2).sum()` in a loop) with only the buffers
and the values of bound Variables changing. The structure of a graph is its nodes in a fixed walk order: op, dtype,
arg and which earlier nodes are its sources, with every buffer replaced by its description (device, size, dtype,
options, whether it is allocated, its view offset, and which earlier buffer shares its memory) and every bound
Variable replaced by the Variable alone. Keyed by that plus every ContextVar's value (DEBUG, BEAM, NOOPT, DEV, ...) and
the plugin registry, an entry holds the lowered runners, buffer slots and memory plan of the schedule; a hit binds
this call's buffers and Variable values into them.

Keys hold no buffer and no UOp of a user graph (descriptions and numbers only), so the cache keeps nothing alive.
Constants stay part of the structure (they are compiled into the kernels): a float is keyed by its bits (`hex`), so
-0.0 and 0.0 differ. Anything the walk doesn't understand (an arg that is an arbitrary object) makes a graph uncacheable:
it is scheduled the ordinary way."""
from __future__ import annotations
import functools, operator
from dataclasses import dataclass
from typing import Any
from tinycore.uop import UOp, Ops
from tinycore.dtype import DType
from tinycore.device import Buffer, Device, Compiled
from tinycore.helpers import ContextVar, DEBUG
from tinycore.engine.run import ExecItem, run_items, lower_schedule, _frees_after
from tinycore.engine import schedule as schedule_mod   # through the module: tests count its calls
from tinycore.engine.schedule import _is_view_of_buffer

MAX_ENTRIES = 512
_cache: dict[tuple, CachedSchedule] = {}   # insertion order: the oldest entries go first when it is full
stats = {"hits": 0, "misses": 0, "uncacheable": 0}   # tests and the bench read these

class _Uncacheable(Exception):
  """The graph holds something whose equality doesn't mean 'same schedule'."""

_PLAIN = {int, bool, str, bytes, type(None), Ops}
_SHARDED = {Ops.MULTI, Ops.MSELECT, Ops.COPY, Ops.DEVICE}   # with a tuple arg: a sharded value (engine/multi.py lowers it)
_pure_args: set[tuple] = set()   # tuple args seen to hold only plain values (no UOp, no float): keyed as they are

def _is_pure(a: tuple) -> bool:
  for x in a:
    c = x.__class__
    if c is tuple:
      if not _is_pure(x): return False
    elif c not in _PLAIN and not isinstance(x, DType): return False
  return True

def _uops_in(a: tuple) -> tuple[UOp, ...]:
  """UOps inside a (nested) tuple arg: symbolic shapes of movement ops."""
  out: list[UOp] = []
  for x in a:
    if x.__class__ is tuple: out.extend(_uops_in(x))
    elif isinstance(x, UOp): out.append(x)
  return tuple(out)

def _arg_key(a: Any, idx: dict[UOp, int]) -> Any:
  c = a.__class__
  if c is tuple: return tuple([_arg_key(x, idx) for x in a])
  if c is float: return ("float", a.hex())   # -0.0 == 0.0 and nan != nan: the bits are what gets compiled
  if c in _PLAIN or isinstance(a, DType): return a
  if c is UOp: return ("uop", idx[a])
  raise _Uncacheable(f"{c.__name__} arg")

@dataclass
class Structure:
  key: tuple
  leaves: list[Buffer]           # the graph's buffers, in walk order: the slots 0..len-1 of a cached schedule
  var_vals: dict[UOp, int]       # every bound Variable's value
  index: dict[UOp, int]          # node -> walk position (outputs that are graph nodes are found through it)

def structure_of(targets: list[UOp]) -> Structure | None:
  """The structural key of the graph computing `targets`, with this call's buffers and Variable values; None when the
  graph can't be keyed (then it is scheduled without the cache) or is sharded (keyed once lowered to per-device graphs)."""
  idx: dict[UOp, int] = {}
  key: list[tuple] = []
  leaves: list[Buffer] = []
  bases: dict[int, int] = {}
  var_vals: dict[UOp, int] = {}
  stack: list[UOp] = list(reversed(targets))
  BUFFER, BIND, CONST, pure = Ops.BUFFER, Ops.BIND, Ops.CONST, _pure_args
  # (no comprehensions in this loop: each one is a function call in python 3.11, and this runs on every eager realize)
  try:
    while stack:
      n = stack[-1]
      if n in idx:
        stack.pop()
        continue
      op, arg, kids = n.op, n.arg, n.src
      if op is BIND: kids = kids[:1]   # a bound value is not structure
      elif arg.__class__ is tuple:
        if op in _SHARDED: raise _Uncacheable("sharded")   # MULTI, MSELECT, COPY or DEVICE on a device tuple
        if arg not in pure:
          if _is_pure(arg):
            if len(pure) > 65536: pure.clear()
            pure.add(arg)
          else: kids = kids + _uops_in(arg)
      # post-order: a node is keyed once all its sources (and the UOps in its arg) have been
      ready = True
      for k in kids:
        if k not in idx:
          stack.append(k)
          ready = False
      if not ready: continue
      stack.pop()
      if op is BUFFER:
        # aliasing is structure: an assign reading its own target, or two views of one allocation
        share = bases.setdefault(id(arg._base if arg._base is not None else arg), len(leaves))
        entry: tuple = (op, n.dtype, arg.device, arg.size, arg.dtype, arg.options, hasattr(arg, "_buf"), arg.offset, share)
        leaves.append(arg)
      elif op is BIND:
        var_vals[kids[0]] = n.src[1].arg
        entry = (op, n.dtype, idx[kids[0]])
      else:
        # constants are compiled in, so their exact bits are structure; other args compare with ==, as hash-consing does
        if op is CONST and arg.__class__ is float: arg = ("float", arg.hex())   # -0.0 == 0.0 and nan != nan: bits are compiled
        elif op is CONST or not (arg is None or arg.__class__ is int or arg in pure): arg = _arg_key(arg, idx)
        src = n.src
        if not src: entry = (op, n.dtype, arg)
        elif len(src) == 1: entry = (op, n.dtype, arg, idx[src[0]])
        elif len(src) == 2: entry = (op, n.dtype, arg, (idx[src[0]], idx[src[1]]))
        else: entry = (op, n.dtype, arg, tuple(map(idx.__getitem__, src)))
      idx[n] = len(key)
      key.append(entry)
  except _Uncacheable: return None
  return Structure((_context(), _registry().pm, tuple(key), tuple(map(idx.__getitem__, targets))), leaves, var_vals, idx)

def _context() -> tuple:
  """Every ContextVar's value (DEBUG, BEAM, NOOPT, DEV, ...): any of them may change what a schedule is."""
  return tuple(map(_value, ContextVar._registry.values()))
_value = operator.attrgetter("value")

@functools.cache
def _registry() -> Any:
  from tinycore import plugins
  return plugins.registry

def _shape(u: UOp) -> tuple:
  if (shape := u.shape) is None: raise RuntimeError(f"realize target {u.op} has no shape")
  return shape

@dataclass(frozen=True)
class CachedSchedule:
  """A schedule with its buffers as slots: 0..L-1 are the graph's buffers (Structure.leaves), L.. the ones it creates."""
  items: tuple[tuple[Any, tuple[int, ...]], ...]        # (runner, buffer slots), in run order
  new_bufs: tuple[tuple[str, int, DType, Any, Compiled], ...]   # device, size, dtype, options and opened device per created buffer
  frees: tuple[tuple[int, tuple[int, ...]], ...]        # (item, slots freed once it has run): the memory plan
  outputs: tuple[tuple[bool, int], ...]                 # per target: (True, created slot) or (False, walk position of a graph node)

  def bind(self, s: Structure, targets: list[UOp]) -> tuple[list[Buffer], list[UOp]]:
    """Fresh buffers for this call, and the output UOps that read them."""
    bufs = s.leaves + [Buffer(d, size, dt, options=o, compiled=c) for d, size, dt, o, c in self.new_bufs]
    outs: list[UOp] = []
    nodes: list[UOp] | None = None
    for t, (created, i) in zip(targets, self.outputs):
      if created:
        b = UOp(Ops.BUFFER, t.dtype, (), bufs[i])
        outs.append(b if (shape := _shape(t)) == (bufs[i].size,) else UOp(Ops.RESHAPE, t.dtype, (b,), shape))
      else:
        if nodes is None: nodes = list(s.index)
        outs.append(nodes[i])
    return bufs, outs

  def run(self, s: Structure, targets: list[UOp]) -> list[UOp]:
    """Run this schedule on the buffers and Variable values of `s` (a graph of the same structure as the one it was made
    for); returns, per target, a UOp that reads its result."""
    bufs, outputs = self.bind(s, targets)
    items = [ExecItem(runner, [bufs[k] for k in slots], s.var_vals) for runner, slots in self.items]
    run_items(items, {i: [bufs[k] for k in f] for i, f in self.frees} if self.frees else {})
    return outputs

def lookup(s: Structure) -> CachedSchedule | None:
  try: hit = _cache.get(s.key)
  except TypeError: return None   # an unhashable buffer option: never cached
  # a hit doesn't move its entry to the end (that hashes the whole key again): eviction is by age, not by last use
  stats["misses" if hit is None else "hits"] += 1
  return hit

def remember(s: Structure, targets: list[UOp], schedule: list, outputs: list[UOp], runners: list, frees: dict) -> None:
  """Store the schedule just made for `s`, unless something in it isn't expressible as slots (then it isn't cached)."""
  slot: dict[int, int] = {}
  for i, b in enumerate(s.leaves): slot.setdefault(id(b), i)
  new: list[Buffer] = []
  items = []
  for si, runner in zip(schedule, runners):
    if any(s.var_vals.get(v, None) != val for v, val in si.var_vals.items()): return
    slots = []
    for b in si.bufs:
      if (k := slot.get(id(b))) is None:
        if b._base is not None or b.is_allocated(): return   # a buffer the graph didn't show: not ours to recreate
        k = slot[id(b)] = len(s.leaves) + len(new)
        new.append(b)
      slots.append(k)
    items.append((runner, tuple(slots)))
  outs = []
  for t, o in zip(targets, outputs):
    ob = o.base
    k = slot.get(id(ob.arg), -1) if ob.op is Ops.BUFFER else -1
    if k >= len(s.leaves) and UOp(Ops.BUFFER, t.dtype, (), ob.arg).reshape(_shape(t)) is o: outs.append((True, k))
    elif (j := s.index.get(o)) is not None: outs.append((False, j))
    else: return
  free_slots = tuple((i, tuple(slot[id(b)] for b in bs)) for i, bs in frees.items() if bs)
  new_bufs = tuple((b.device, b.size, b.dtype, b.options, Device[b.device]) for b in new)
  # the context as it is now: scheduling may have registered ContextVars (an emulator's), and the next lookup sees them
  try: _cache[(_context(),) + s.key[1:]] = CachedSchedule(tuple(items), new_bufs, free_slots, tuple(outs))
  except TypeError: return
  if len(_cache) > MAX_ENTRIES:   # the oldest quarter: a structure still in use is scheduled again once
    for old in list(_cache)[:MAX_ENTRIES // 4]: del _cache[old]

def clear() -> None:
  _cache.clear()

def in_memory(targets: list[UOp]) -> bool:
  """Every target already is a buffer (maybe reshaped) or a constant: nothing to schedule (create_schedule would return
  them as they are)."""
  for t in targets:
    if t.op is not Ops.CONST and not _is_view_of_buffer(t): return False
  return True

def schedule_and_run(targets: list[UOp], s: Structure | None = None) -> list[UOp]:
  """Compute `targets` (eager realize): a known structure reuses its schedule, a new one is scheduled and remembered
  (under `s` when given: the structure of the graph as the frontend built it, looked up already). Returns, per target,
  a UOp that reads its result."""
  if in_memory(targets): return targets
  if s is None:
    # DEBUG>=3 shows the scheduler at work and schedule observers see every schedule made: both want the real thing
    s = structure_of(targets) if DEBUG.value < 3 else None
    if s is not None and (hit := lookup(s)) is not None: return hit.run(s, targets)
  schedule, outputs = schedule_mod.create_schedule(targets, return_outputs=True)
  frees = _frees_after(schedule, {o.base.arg.base for o in outputs if o.base.op is Ops.BUFFER})
  items = lower_schedule(schedule)
  if s is not None: remember(s, targets, schedule, outputs, [ei.runner for ei in items], frees)
  else: stats["uncacheable"] += 1
  run_items(items, frees)
  return outputs
