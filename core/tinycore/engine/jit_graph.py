"""Device graphs: a TinyJit replay hands each run of consecutive kernels to its device to launch in one call.

Launching a captured kernel from Python costs microseconds (arguments gathered, the program called), which is most of
the time of a small step (a decode step runs hundreds of small kernels). A device whose `Compiled.graph` is set offers
to take over: after capture, TinyJit describes each maximal run of consecutive kernels on one such device as a list of
GraphKernel (program, buffers, Variables, sizes) plus where the inputs go, and calls `graph(kernels, inputs)`. The
device builds whatever it launches fastest (an argument table, a command buffer) and returns a callable that replays
the whole run given this call's input buffers and Variable values; it raises GraphUnsupported to decline, and those
kernels replay one by one as before. Copies and runners that can't describe their launch split the runs.

Core keeps what is device-independent: the bounds checks of kernels whose accesses depend on a Variable, and the
counters. `JIT=2` turns graphs off (tinygrad's meaning), as do DEBUG>=2 and the profiler, which time kernels one by one."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any, Callable
from tinycore.uop import UOp
from tinycore.helpers import GlobalCounters

class GraphUnsupported(Exception):
  """A device's graph declines a batch of kernels; the message says why (TinyJit then launches them one by one)."""

@dataclass(eq=False)
class GraphKernel:
  """One kernel launch of a batch, in device-neutral terms."""
  name: str
  prg: Any                        # the device's Program (what Compiled.runtime returned)
  bufs: list                      # a Buffer per argument, None where an input of the call goes (see inputs)
  vals: tuple                     # per scalar argument: an int, or the Variable whose value each replay supplies
  global_size: tuple              # ints, or expressions of the Variables
  local_size: tuple
  work: int                       # estimated FLOPs + bytes (a CPU decides on threads by it)
  fixed_vars: dict = field(default_factory=dict)   # Variables bound for this kernel alone at capture

  def size(self, var_vals: dict[UOp, int]) -> tuple[int, ...]:
    """global_size with this replay's Variable values."""
    from tinycore.engine.run import sym_infer
    vv = {**self.fixed_vars, **var_vals} if self.fixed_vars else var_vals
    return tuple(g if isinstance(g, int) else sym_infer(g, vv) for g in self.global_size)

def describe(ei, replayed_vars: frozenset, input_slots: set[int]) -> GraphKernel | None:
  """The launch an ExecItem makes, or None when its runner can't say (a copy, a Python runner).
  A runner other than a compiled kernel takes part by offering graph_launch() -> (prg, vals, global_size, local_size, work)."""
  from tinycore.engine.run import CompiledRunner
  r = ei.runner
  if type(r) is CompiledRunner:
    p = r.p
    prg, raw_vals, gs, ls, work = r.prg, tuple(p.vars), tuple(p.global_size), tuple(p.local_size), r._work
  elif (launch := getattr(r, "graph_launch", None)) is not None: prg, raw_vals, gs, ls, work = launch()
  else: return None
  vals = []
  for v in raw_vals:
    if isinstance(v, int): vals.append(v)
    elif v in replayed_vars: vals.append(v)              # given per call: a replay's var_vals override the item's own
    elif v in ei.var_vals: vals.append(ei.var_vals[v])
    else: return None
  bufs = [None if i in input_slots else b for i, b in enumerate(ei.bufs)]
  return GraphKernel(getattr(getattr(r, "p", None), "name", "?"), prg, bufs, tuple(vals), gs, ls, work, dict(ei.var_vals))

def _device_of(k: GraphKernel):
  b = next((b for b in k.bufs if b is not None), None)
  return None if b is None else b.compiled

class GraphedReplay:
  """A capture's kernels as segments: device graphs where a device took them, the rest launched one by one."""
  def __init__(self, segments: list, n_graphed: int):
    self.segments, self.n_graphed = segments, n_graphed   # a segment: a _GraphSegment, or (start, end) of items
    self.all_graphed = not any(isinstance(s, tuple) for s in segments)   # then no item needs the inputs patched in

  def __call__(self, items: list, var_vals: dict[UOp, int], input_bufs: list, launch_items: Callable[[list, dict], None]) -> None:
    for b in input_bufs:
      if not hasattr(b, "_buf"): b.allocate()   # an empty input may never have been (ExecItem.run allocates it too)
    for seg in self.segments:
      if isinstance(seg, tuple): launch_items(items[seg[0]:seg[1]], var_vals)
      else: seg(input_bufs, var_vals)

class _GraphSegment:
  """One device graph plus the per-replay bounds checks and counters core keeps for its kernels."""
  def __init__(self, graph, items: list, kernels: list[GraphKernel], inputs: dict[tuple[int, int], int]):
    self.graph, self.kernels = graph, kernels
    self.ops = sum(getattr(getattr(ei.runner, "p", None), "ops", 0) for ei in items)
    self.mem = sum(getattr(getattr(ei.runner, "p", None), "mem", 0) for ei in items)
    # kernels whose accesses depend on a Variable: checked against the buffers before every replay (engine/bounds.py);
    # dropped after the first once proven in bounds for every value, unless an input (whose buffer varies) is an argument
    from tinycore.engine.run import CompiledRunner
    self.checks = [(ei.runner, j, k) for j, (ei, k) in enumerate(zip(items, kernels))
                   if type(ei.runner) is CompiledRunner and ei.runner.p.vars]
    self.inputs = inputs
    self.first = True

  def __call__(self, input_bufs: list, var_vals: dict[UOp, int]) -> None:
    if self.checks:
      for r, j, k in self.checks:
        bufs = [input_bufs[self.inputs[(j, i)]] if b is None else b for i, b in enumerate(k.bufs)]
        vv = {**k.fixed_vars, **var_vals}
        r._check_bounds(bufs, tuple([vv[v] for v in r.p.vars]))
      if self.first:
        self.first = False
        self.checks = [(r, j, k) for r, j, k in self.checks if not (r.accesses == [] or (
          r.proven.get(tuple(b.nbytes for b in k.bufs if b is not None)) is True and None not in k.bufs))]
    self.graph(input_bufs, var_vals)
    GlobalCounters.kernel_count += len(self.kernels)
    GlobalCounters.global_ops += self.ops
    GlobalCounters.global_mem += self.mem

def build(items: list, input_replace: dict[tuple[int, int], int], replayed_vars: frozenset) -> GraphedReplay | None:
  """Offer each maximal run of describable kernels on one graph-capable device to that device. None when no device
  took any (the caller keeps its own replay); every buffer must be allocated (the first replay allocates them)."""
  slots: dict[int, set[int]] = {}
  for (j, i) in input_replace: slots.setdefault(j, set()).add(i)
  descs = [describe(ei, replayed_vars, slots.get(j, set())) for j, ei in enumerate(items)]
  devs = [_device_of(d) if d is not None else None for d in descs]
  segments: list = []
  n_graphed, j = 0, 0
  while j < len(items):
    dev = devs[j]
    end = j + 1
    if dev is not None and getattr(dev, "graph", None) is not None:
      while end < len(items) and devs[end] is dev: end += 1
      kernels = descs[j:end]
      inputs = {(jj - j, i): k for (jj, i), k in input_replace.items() if j <= jj < end}
      try:
        graph = dev.graph(kernels, inputs)
        segments.append(_GraphSegment(graph, items[j:end], kernels, inputs))
        n_graphed += end - j
        j = end
        continue
      except GraphUnsupported: pass
    if segments and isinstance(segments[-1], tuple): segments[-1] = (segments[-1][0], end)
    else: segments.append((j, end))
    j = end
  return GraphedReplay(segments, n_graphed) if n_graphed else None
