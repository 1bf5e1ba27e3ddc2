"""Multi-device tensors, the frontend side: `Tensor.shard(devices, axis)` builds a MULTI node (uop.py) of one shard per
device, and every later op is an ordinary op on it: shapes are the full logical shapes, the device is the tuple.
engine/multi.py lowers such graphs to per-device graphs and copies when they are realized; gradient.py has the rules for
MULTI and MSELECT, so autograd runs on the logical graph like on any other.

Semantics (tinygrad's): shards split `axis` like numpy.array_split (every shard non-empty, else ValueError); axis=None
gives each device a full copy. A reduction over the sharded axis gives a replicated result (an all-reduce); `.to(device)`
and `.numpy()` gather; data built for a device tuple (`Tensor(x, device=(...))`) is replicated."""
from __future__ import annotations

from tinycore.device import Device
from tinycore.engine.multi import copy_to, cut, multi, shape_of, sharding
from tinycore.uop import Ops, UOp, shard_bounds


def shard(u: UOp, devices: tuple[str, ...], axis: int | None) -> UOp:
  if not devices: raise ValueError("shard needs at least one device")
  if len(set(devices)) != len(devices): raise ValueError(f"shard devices must be distinct, got {devices}")
  if axis is not None:   # clear errors now, not when the shards are realized
    if not 0 <= axis < len(shape_of(u)): raise ValueError(f"can't shard a tensor of shape {u.shape} along axis {axis}")
    shard_bounds(shape_of(u)[axis], len(devices))
  for d in devices: Device[d]   # an unknown device name fails here, with the list of installed ones
  if isinstance(u.device, tuple):
    if u.op is Ops.MULTI and u.arg == (axis, devices): return u
    # resharding on the same devices: each takes its part (engine/multi.py moves only what must move)
    if u.device == devices: return multi([UOp(Ops.MSELECT, u.dtype, (u,), (i, axis)) for i in range(len(devices))], axis, devices)
    u = UOp(Ops.COPY, u.dtype, (u,), devices[0])   # other devices: through the first one
  if not any(n.op in (Ops.BUFFER, Ops.COPY, Ops.ASSIGN, Ops.MULTI, Ops.CUSTOM) for n in u.toposort()):
    return multi([cut(on_device(u, d), axis, i, len(devices)) for i, d in enumerate(devices)], axis, devices)   # constants: made on each device
  return multi([copy_to(cut(u, axis, i, len(devices)), d) for i, d in enumerate(devices)], axis, devices)

def on_device(u: UOp, device: str | tuple[str, ...]) -> UOp:
  """A constant-only graph made on `device` instead: its DEVICE leaves rewritten, no copy."""
  return u.substitute({n: UOp(Ops.DEVICE, arg=device) for n in u.toposort() if n.op is Ops.DEVICE})

def on_tensor(u: UOp, devices: tuple[str, ...] | None) -> UOp:
  """Tensor.__init__'s hook for data made for a device tuple: a buffer is copied to every device now (like the host
  data it came from); constants become constants on the tuple; an empty() placeholder becomes one buffer per device."""
  from tinycore.device import Buffer
  b = u.base
  if devices is None:   # a UOp given directly: only an empty() placeholder on a device tuple needs work
    if b.op is not Ops.BUFFER or not isinstance(b.arg.device, tuple) or b.arg.is_allocated(): return u
    devices = b.arg.device
    return multi([u.substitute({b: UOp(Ops.BUFFER, b.dtype, (), Buffer(d, b.arg.size, b.dtype))}) for d in devices], None, devices)
  if b.op is Ops.BUFFER and b.arg.is_allocated() and u.op in (Ops.BUFFER, Ops.RESHAPE):
    data = b.arg.as_buffer()
    def replica(d: str) -> UOp:
      if d == b.arg.device: return u
      nb = Buffer(d, b.arg.size, b.dtype)
      if b.arg.size: nb.allocate().copyin(data)
      return u.substitute({b: UOp(Ops.BUFFER, b.dtype, (), nb)})
    return multi([replica(d) for d in devices], None, devices)
  return on_device(u, devices) if not any(n.op is Ops.BUFFER for n in u.toposort()) else shard(u, devices, None)

def shard_like(u: UOp) -> tuple[tuple[str, ...], int | None] | None:
  """(devices, axis) to shard like the value `u`; None when `u` is on one device."""
  if (s := sharding(u)) is None: return None
  return s[1], s[0]

def shard_buffers(u: UOp) -> list | None:
  """The shard buffers of a realized sharded value (a MULTI of buffer views), else None."""
  if u.op is not Ops.MULTI or not all(s.base.op is Ops.BUFFER for s in u.src): return None
  return [s.base.arg for s in u.src]

def parts(u: UOp) -> tuple[UOp, ...]:
  """What realizing `u` produces buffers for: its shards for a MULTI, else u."""
  return u.src if u.op is Ops.MULTI else (u,)
