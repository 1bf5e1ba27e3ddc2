"""Turning lazy UOp graphs into buffers: schedule, lower and run."""
from __future__ import annotations
from tinycore.uop import UOp, Ops
from tinycore.helpers import ContextVar, DEBUG
from tinycore.stages import apply_stage
from tinycore.attention_formula import fuse_attention_formula
from tinycore.engine.schedule_cache import in_memory, lookup, schedule_and_run, structure_of
from tinycore.engine.multi import lower_targets
from tinycore.engine import assign_once

REFERENCE = ContextVar("REFERENCE", 0)

def realize_uops(uops: list[UOp]) -> list[UOp]:
  """Compute every UOp in `uops`; return, for each, a UOp that reads its result from a buffer. An assign in them that
  an earlier realize ran reads its target instead of running again (assign_once.py)."""
  uops, pending = assign_once.resolve(uops)
  out = _realize(uops)
  if pending: assign_once.mark_ran(pending)
  return out

def _realize(uops: list[UOp]) -> list[UOp]:
  if REFERENCE.value:
    lowered, regroup = lower_targets(uops)
    return regroup(_realize_reference(lowered))
  if in_memory(uops): return uops   # Tensor(array).realize() and the like: nothing to schedule
  # eager code repeats graph structures: a known one runs its cached schedule (keyed before the tensor stage, which is
  # a function of the structure: the device's rules, and the device is part of the key)
  s = structure_of(uops) if DEBUG.value < 3 else None   # None for a sharded graph: keyed below, once lowered
  if s is not None and (hit := lookup(s)) is not None: return hit.run(s, uops)
  uops, regroup = lower_targets(uops)   # multi: sharded graphs become per-device graphs + copies; regroup joins the shards
  return regroup(schedule_and_run(tensor_stage(uops), s))

def tensor_stage(uops: list[UOp]) -> list[UOp]:
  """The tensor stage (Tensor.schedule shows what realize runs, so both call this): a hand-written attention becomes
  the fused kernel where the device has one (attention_formula.py), then each target's device rewrites its graph."""
  return [apply_stage(fuse_attention_formula(u), u.device, "tensor") for u in uops]  # type: ignore[arg-type]   # a multi-device tuple has no single owner: skipped

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
