"""Gradient allreduce overlapped with backward.

Backward is one lazy graph: realizing the buckets one at a time would recompute what their gradients share. Instead
every gradient's packing (an assign into its slice of a bucket's persistent buffer) is scheduled as one graph, and
the lowered kernel list is run with collective items spliced in: a bucket's nonblocking allreduce starts right after
the last kernel that writes the bucket, the kernels for the remaining gradients run while it travels, and every bucket
is waited for after the last kernel. MPI moves a nonblocking collective along only inside MPI calls, so a progress poll
(one MPI_Test per pending bucket, about a microsecond) follows each kernel while a bucket is in flight.

The spliced items are ordinary ExecItems, so TinyJit captures the starts, polls and waits with the kernels and replays
them in the same places."""
from __future__ import annotations
from typing import Any
from tinycore.device import Buffer
from tinycore.tensor import Tensor
from tinycore.distributed.collectives import CollectiveRunner
from tinycore.distributed.engine import CollectiveEngine, CollectiveError

class _InFlight:
  """The handles of the buckets started and not yet waited for, shared by one schedule's start/poll/wait items."""
  def __init__(self, engine: CollectiveEngine, op: str, n: int):
    self.engine, self.op, self.handles = engine, op, [None] * n
  def start(self, k: int, buf: Buffer) -> None: self.handles[k] = self.engine.allreduce_start(buf, buf, self.op)
  def poll(self, *_: Any) -> None:
    for h in self.handles:
      if h is not None: self.engine.progress(h)
  def wait(self, k: int) -> None:
    h, self.handles[k] = self.handles[k], None
    self.engine.allreduce_wait(h)

def _lowered(uops: list, keep: set) -> tuple[list, dict, list]:
  """The kernels that compute `uops` (ExecItems), the memory plan (item -> buffers to free after it) and the output UOps,
  as an eager realize makes them (engine/realize.py): a graph of a structure seen before (every later step) reuses its
  cached schedule instead of being scheduled again."""
  from tinycore.engine import schedule_cache as sc
  from tinycore.engine.run import ExecItem, lower_schedule, _frees_after
  from tinycore.engine.schedule import create_schedule
  from tinycore.stages import apply_stage
  s = sc.structure_of(uops)
  if s is not None and (hit := sc.lookup(s)) is not None:
    bufs, outputs = hit.bind(s, uops)
    items = [ExecItem(runner, [bufs[k] for k in slots], s.var_vals) for runner, slots in hit.items]
    return items, {i: [bufs[k] for k in f] for i, f in hit.frees}, outputs
  targets = [apply_stage(u, str(u.device), "tensor") for u in uops]   # one device each (checked by the caller)
  schedule, outputs = create_schedule(targets, return_outputs=True)
  frees = _frees_after(schedule, keep)
  items = lower_schedule(schedule)
  if s is not None: sc.remember(s, targets, schedule, outputs, [ei.runner for ei in items], frees)
  return items, frees, outputs

def realize_and_allreduce(packs: list[Tensor], buckets: list[Buffer], engine: CollectiveEngine, op: str, overlap: bool = True) -> None:
  """Realize `packs` (assigns of gradients into slices of the `buckets`) as one schedule and allreduce each bucket in
  place, as soon as the last kernel that writes it has run (`overlap`) or after every kernel (not overlapped: the same items in
  another order, for measuring); returns once every bucket holds its reduced values."""
  from tinycore.engine.run import ExecItem, run_items
  if any(t.uop.has_multi for t in packs): raise CollectiveError("overlapped gradient allreduce takes gradients on one device, not sharded ones")
  items, frees, outputs = _lowered([t.uop for t in packs], {b.base for b in buckets})
  if overlap: last = {k: max((i for i, ei in enumerate(items) if ei.bufs[0].base is b), default=-1) for k, b in enumerate(buckets)}
  else: last = {k: len(items) - 1 for k in range(len(buckets))}
  state = _InFlight(engine, op, len(buckets))
  out: list[ExecItem] = []
  out_frees: dict[int, list[Buffer]] = {}
  started = 0
  # a bucket with no kernel (its gradient is already a realized buffer) starts before the first kernel
  for k in (k for k, i in last.items() if i < 0):
    out.append(ExecItem(CollectiveRunner(f"allreduce_start_{op}", lambda b, k=k: state.start(k, b)), [buckets[k]], {}))
    started += 1
  for i, ei in enumerate(items):
    out.append(ei)
    if i in frees: out_frees[len(out) - 1] = frees[i]
    if started: out.append(ExecItem(CollectiveRunner("allreduce_progress", state.poll), [], {}))
    for k in (k for k, j in last.items() if j == i):
      out.append(ExecItem(CollectiveRunner(f"allreduce_start_{op}", lambda b, k=k: state.start(k, b)), [buckets[k]], {}))
      started += 1
  for k, b in enumerate(buckets): out.append(ExecItem(CollectiveRunner(f"allreduce_wait_{op}", lambda b, k=k: state.wait(k)), [b], {}))
  run_items(out, out_frees)
  for t, u in zip(packs, outputs): t.uop = u
