"""Turning lazy UOp graphs into buffers: schedule, lower and run."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.helpers import ContextVar
from tinycore.stages import apply_stage
from tinycore.engine.schedule_cache import schedule_and_run
from tinycore.engine.multi import lower_targets

REFERENCE = ContextVar("REFERENCE", 0)

def realize_uops(uops: list[UOp]) -> list[UOp]:
  """Compute every UOp in `uops`; return, for each, a UOp that reads its result from a buffer."""
  uops, regroup = lower_targets(uops)   # multi: sharded graphs become per-device graphs + copies; regroup joins the shards
  if REFERENCE.value: return regroup(_realize_reference(uops))
  # the tensor stage: each target's device rewrites the graph it is about to realize
  uops = [apply_stage(u, u.device, "tensor") for u in uops]  # type: ignore[arg-type]   # a multi-device tuple has no single owner: skipped
  return regroup(schedule_and_run(uops))   # a graph whose structure was seen before reuses its schedule

def _realize_reference(uops: list[UOp]) -> list[UOp]:
  import numpy as np
  from tinycore.engine.reference import evaluate
  from tinycore.engine.numeric import float_to_bits
  from tinycore.device import Buffer
  cache: dict = {}
  vals = [evaluate(u, cache) for u in uops]   # everything is read before anything is written
  out = []
  for u, v in zip(uops, vals):
    if u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER and u.src[0].arg.is_allocated()): out.append(u); continue
    target = u.src[0].base if u.op is Ops.ASSIGN else None
    buf = target.arg if target is not None else Buffer(u.device, max(v.size, 1), u.dtype)  # type: ignore[arg-type]
    arr = float_to_bits(v, u.dtype) if u.dtype.fmt is None else np.ascontiguousarray(v, dtype=u.dtype.np)
    if v.size: buf.ensure_allocated().copyin(memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)))  # type: ignore[arg-type]
    out.append(u.src[0] if target is not None else UOp(Ops.BUFFER, u.dtype, (), buf).reshape(u.shape))
  return out
