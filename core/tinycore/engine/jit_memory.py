"""Memory planning for a TinyJit capture: intermediates whose lifetimes don't overlap share one allocation.

Eager realizes free an intermediate after its last reader (engine/run.py's plan), so a long chain peaks at a few
buffers. A captured graph keeps its buffers for every replay; without a plan it would hold every intermediate at once.
Here each intermediate that only the captured kernels refer to becomes a view at offset 0 of a shared block: blocks
are handed out best-fit (the smallest free block that is big enough, else the biggest free one, grown), a block is
free for a buffer first used at kernel i when its last user ran before i (a kernel never reads one buffer while
writing another in the same memory), and offset 0 keeps every buffer's alignment the allocator's.

Which buffers only the kernels refer to is asked of Python itself: the items' references are dropped for a moment and
a buffer that no Tensor, output, RNG key or other object keeps alive is collected; those are planned, the rest stay."""
from __future__ import annotations
import gc, sys, weakref
from dataclasses import dataclass
from typing import Any
from tinycore.device import Allocator, Buffer, Device
from tinycore.dtype import dtypes
from tinycore.helpers import DEBUG

@dataclass
class _Block:
  nbytes: int
  free_after: int   # index of the last kernel that uses the block so far

@dataclass(frozen=True)
class _Desc:
  device: str
  size: int
  dtype: Any
  options: Any
  first: int
  last: int
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize

def _scan(items: list) -> tuple[dict[int, _Desc], dict[int, weakref.ref], list[list[tuple[int | None, Any]]]]:
  """Per planned-for buffer (a base buffer in some item): its description and a weak reference; per item, its slots as
  (id, None) for those and (None, object) for the rest (views, the inputs' empty slots)."""
  descs: dict[int, _Desc] = {}
  refs: dict[int, weakref.ref] = {}
  rows: list[list[tuple[int | None, Any]]] = []
  for j, ei in enumerate(items):
    row: list[tuple[int | None, Any]] = []
    for b in ei.bufs:
      if b is None or b._base is not None:
        row.append((None, b))
        continue
      if (k := id(b)) not in descs: refs[k], descs[k] = weakref.ref(b), _Desc(b.device, b.size, b.dtype, b.options, j, j)
      else: descs[k] = _Desc(b.device, b.size, b.dtype, b.options, descs[k].first, j)
      row.append((k, None))
    rows.append(row)
  return descs, refs, rows

def _best_fit(descs: dict[int, _Desc], ids: set[int]) -> dict[int, _Block]:
  """A block per buffer, in order of first use: the smallest free block that fits, else the biggest free one (grown)."""
  pools: dict[tuple, list[_Block]] = {}
  out: dict[int, _Block] = {}
  for k in sorted(ids, key=lambda k: descs[k].first):
    d = descs[k]
    pool = pools.setdefault((d.device, d.options), [])
    free = [blk for blk in pool if blk.free_after < d.first]
    fit = min((blk for blk in free if blk.nbytes >= d.nbytes), key=lambda blk: blk.nbytes, default=None)
    if fit is None and free: fit = max(free, key=lambda blk: blk.nbytes)
    if fit is None: pool.append(fit := _Block(0, -1))
    fit.nbytes, fit.free_after = max(fit.nbytes, d.nbytes), d.last
    out[k] = fit
  return out

def share_intermediates(items: list) -> None:
  """Replace, in the captured ExecItems, the buffers only they use by views into shared blocks (see the module doc)."""
  descs, refs, rows = _scan(items)
  if not descs: return
  for ei, row in zip(items, rows): ei.bufs = [obj for _, obj in row]
  gc.collect()   # with the items' references gone, a buffer nothing else holds is collected now
  dead = {k for k, r in refs.items() if r() is None}
  blocks = _best_fit(descs, dead)
  storage: dict[int, Buffer] = {}
  new: dict[int, Buffer] = {}
  for k in dead:
    d, blk = descs[k], blocks[k]
    if not _has_views(d.device):
      new[k] = Buffer(d.device, d.size, d.dtype, options=d.options)
      continue
    if (base := storage.get(id(blk))) is None: base = storage[id(blk)] = Buffer(d.device, blk.nbytes, dtypes.uint8, options=d.options)
    new[k] = Buffer(d.device, d.size, d.dtype, base=base, offset=0)
  for ei, row in zip(items, rows): ei.bufs = [obj if k is None else new[k] if k in new else refs[k]() for k, obj in row]
  if DEBUG >= 2 and dead:
    planned, held = sum(descs[k].nbytes for k in dead), sum(b.nbytes for b in storage.values())
    print(f"JIT memory plan: {len(dead)} intermediates ({planned/1e6:.2f} MB) share {len(storage)} blocks ({held/1e6:.2f} MB)")

def _has_views(device: str) -> bool:
  """Whether the device's allocator makes sub-buffers (those of this repo's plugins all do; one that doesn't keeps a
  buffer per intermediate)."""
  return type(Device[device].allocator)._offset is not Allocator._offset

class CaptureRecorder:
  """The capture hook: records every ExecItem and, before each new one, gives back the memory of earlier buffers that
  only the recorded items still refer to. Without it a capture holds every intermediate that Python code around the
  kernels made and dropped (a hand-written kernel's output, a realized layer input): an LLM prefill chunk's capture
  peaked ~15 MiB above its replays. The Buffer objects stay (unallocated) in the items; share_intermediates then
  gives them planned storage, and nothing can read one before that: with no Tensor or UOp holding it, no later kernel
  can name it. Who else refers to a buffer is asked of CPython's reference count, with a sentinel held the same way
  as the buffers to calibrate what this check itself adds."""
  def __init__(self):
    self.items: list = []
    self._uses: dict[int, int] = {}       # id(buffer) -> how many recorded item slots hold it
    # id(buffer) -> the buffer, for the bases the items hold; key 0 (first, always) is the calibrating sentinel
    self._held: dict[int, Any] = {0: None}
  def __call__(self, ei) -> None:
    self._release()
    self.items.append(ei)
    for b in ei.bufs:
      if b is None or b._base is not None: continue
      self._uses[id(b)] = self._uses.get(id(b), 0) + 1
      self._held[id(b)] = b
  def _release(self) -> None:
    if not hasattr(sys, "getrefcount"): return   # not CPython: the capture keeps its buffers until the plan, as before
    self._held[0] = object()   # referred to exactly as each buffer is here, by no item
    base = 0
    for k, b in list(self._held.items()):
      if k == 0: base = sys.getrefcount(b)
      # not allocated: an output its kernel hasn't run yet writes, or one the schedule's own plan freed already
      elif b.is_allocated() and sys.getrefcount(b) - base == self._uses[k] and getattr(b, "_owned", False):
        b.deallocate()
        del self._held[k]
    self._held[0] = None
  def close(self) -> None:
    """Let go of the buffers (the items keep theirs): the plan must see which ones only the items hold."""
    self._held, self._uses = {0: None}, {}
