"""Lowering sharded graphs: a graph rewrite that turns every op over MULTI values into one op per device, plus the
copies that move data between devices, before anything is scheduled.

The lazy graph a user builds is logical: a MULTI node (tensor level, see uop.py) stands for the whole tensor, with the
full shape and the device tuple, and ops above it see only that. `lower` rewrites bottom-up until every MULTI is a root
(or feeds a gather), so the scheduler only ever sees single-device graphs:
  - elementwise ops (and contiguous, detach, assign) run per shard, every operand brought to one layout first: the
    first sharded operand's axis (an assign keeps its target's); a replicated operand is cut to each shard's rows locally,
    one sharded on another axis is moved all-to-all (`relayout`);
  - a reduction over the sharded axis reduces per shard, then all-reduces (`allreduce`): every piece is combined once, in
    device order, so the replicas of the result are bitwise equal (weights updated from them stay in sync);
  - movement ops that keep the sharded axis whole run per shard with per-shard arguments; any other movement of the
    sharded axis (a shrink, pad or flip of it, a reshape that splits or merges it) all-gathers first and runs per device;
  - COPY of a MULTI to one device gathers (copies every shard there and concatenates); COPY of a single-device value to
    a device tuple replicates it; MSELECT takes one device's part;
  - constants made for a device tuple, and any op not named above, run once per device (sharded operands all-gathered).
Shards split an axis like numpy.array_split (uop.shard_bounds); every layout change here keeps that split."""
from __future__ import annotations

from collections.abc import Callable

from tinycore.dtype import dtypes
from tinycore.helpers import prod
from tinycore.rewrite import PatternMatcher, UPat, graph_rewrite
from tinycore.uop import GroupOp, Ops, UOp, shard_bounds


def multi(shards: list[UOp] | tuple[UOp, ...], axis: int | None, devices: tuple[str, ...]) -> UOp:
  if len(shards) != len(devices): raise ValueError(f"{len(shards)} shards for {len(devices)} devices {devices}")
  return UOp(Ops.MULTI, shards[0].dtype, tuple(shards), (axis, tuple(devices)))

def shape_of(u: UOp) -> tuple:
  if (shp := u.shape) is None: raise ValueError(f"{u.op.name} has no tensor shape: it can't be sharded")
  return shp

def copy_to(u: UOp, device: str) -> UOp: return u if u.device == device else UOp(Ops.COPY, u.dtype, (u,), device)

def cut(u: UOp, axis: int | None, i: int, n: int) -> UOp:
  """The part of the whole single-device value `u` that shard i of n holds when split on `axis`."""
  if axis is None: return u
  shp = shape_of(u)
  b, e = shard_bounds(shp[axis], n)[i]
  return u.shrink(tuple((b, e) if a == axis else (0, s) for a, s in enumerate(shp)))

def gather(m: UOp, device: str) -> UOp:
  """The whole value of MULTI `m` on one device: every shard copied there, padded into place and summed (like cat)."""
  axis, devices = m.arg
  if axis is None: return copy_to(m.src[devices.index(device)] if device in devices else m.src[0], device)
  full, pieces, off = shape_of(m)[axis], [], 0
  for s in m.src:
    n = shape_of(s)[axis]
    pieces.append(copy_to(s, device).pad(tuple((off, full - off - n) if a == axis else (0, 0) for a in range(len(shape_of(s))))))
    off += n
  return fold(Ops.OR if m.dtype == dtypes.bool else Ops.ADD, pieces)

def fold(op: Ops, xs: list[UOp]) -> UOp:
  """xs[0] op xs[1] op ..., left to right: one fixed order, so every device that folds the same values gets the same bits."""
  out = xs[0]
  for x in xs[1:]: out = UOp(op, out.dtype, (out, x))
  return out

def relayout(m: UOp, axis: int | None) -> UOp:
  """MULTI `m` split on `axis` instead (None: replicated). A replica is cut locally; from another axis, each device gathers
  only its part (every shard's slice of it: an all-to-all, the tensor moved once); to replicated, an all-gather."""
  have, devices = m.arg
  if have == axis: return m
  n = len(devices)
  if have is None: return multi([cut(s, axis, i, n) for i, s in enumerate(m.src)], axis, devices)
  if axis is None: return multi([gather(m, d) for d in devices], None, devices)
  return multi([gather(multi([cut(s, axis, j, n) for s in m.src], have, devices), d) for j, d in enumerate(devices)], axis, devices)

SCATTER_MIN = 4096   # elements of a partial from which an all-reduce reduce-scatters: below it, moving whole partials is cheaper

def allreduce(parts: list[UOp], rop: Ops, devices: tuple[str, ...]) -> UOp:
  """Every device gets the combination of all partials, and the replicas are bitwise equal: each piece is combined once,
  in device order. Small partials are copied whole to every device; from SCATTER_MIN elements, device j combines only
  chunk j of every partial (reduce-scatter), then the chunks are all-gathered: 2(n-1)/n of a partial moved per device
  instead of n-1."""
  n, shp = len(devices), shape_of(parts[0])
  ax = max(range(len(shp)), key=lambda a: shp[a], default=None)
  if ax is None or shp[ax] < n or prod(shp) < SCATTER_MIN:
    return multi([fold(rop, [copy_to(p, d) for p in parts]) for d in devices], None, devices)
  chunks = [fold(rop, [copy_to(cut(p, ax, j, n), d) for p in parts]) for j, d in enumerate(devices)]
  return relayout(multi(chunks, ax, devices), None)

def _devices_of(u: UOp) -> tuple[str, ...]:
  found = {s.arg[1] if s.op is Ops.MULTI else s.arg for s in u.src if s.op is Ops.MULTI or (s.op is Ops.DEVICE and isinstance(s.arg, tuple))}
  if len(found) > 1: raise ValueError(f"{u.op.name} of values on different device tuples: {' and '.join(map(str, sorted(found)))}")
  devices = found.pop()
  if stray := {s.device for s in u.src if s.op is not Ops.MULTI and isinstance(s.device, str)}:
    raise ValueError(f"{u.op.name} mixes a value sharded over {devices} with one on {', '.join(sorted(stray))}: shard it (or .to() it) first")
  return devices

def _per_device(u: UOp, srcs: list[UOp], devices: tuple[str, ...], axis: int | None, arg_of: Callable[[int], object] | None = None) -> UOp:
  """u once per device: a MULTI source gives its shard i, a device-tuple leaf its device i, anything else (a Variable, a
  constant without a device) is shared."""
  def src_i(s: UOp, i: int) -> UOp:
    if s.op is Ops.MULTI: return s.src[i]
    return UOp(Ops.DEVICE, arg=devices[i]) if s.op is Ops.DEVICE and isinstance(s.arg, tuple) else s
  shards = [UOp(u.op, u.dtype, tuple(src_i(s, i) for s in srcs), u.arg if arg_of is None else arg_of(i)) for i in range(len(devices))]
  for s in shards: _ = s.shape   # now, while the sources' are known: asked later, down a long chain, it would recurse
  return multi(shards, axis, devices)

def _elementwise(u: UOp) -> UOp | None:
  if not any(s.op is Ops.MULTI for s in u.src): return None
  devices = _devices_of(u)
  if u.op is Ops.ASSIGN and u.src[0].op is Ops.MULTI: axis = u.src[0].arg[0]   # an assign writes its target's shards in place
  else: axis = next((s.arg[0] for s in u.src if s.op is Ops.MULTI and s.arg[0] is not None), None)
  return _per_device(u, [relayout(s, axis) if s.op is Ops.MULTI else s for s in u.src], devices, axis)

def _reduce(u: UOp, m: UOp) -> UOp:
  rop, axes = u.arg
  axis, devices = m.arg
  parts = [s.r(rop, axes) for s in m.src]
  if axis is None or axis not in axes: return multi(parts, axis, devices)
  return allreduce(parts, rop, devices)

def _keep_axis(u: UOp, axis: int, sizes: list[int]) -> tuple[int, Callable[[int], object]] | None:
  """(the sharded axis after u, u's argument for shard i) when u moves the sharded axis whole; else None."""
  op, arg, shp = u.op, u.arg, shape_of(u.src[0])
  if op is Ops.PERMUTE: return arg.index(axis), lambda i: arg
  if op is Ops.RESHAPE:
    before = prod(shp[:axis])
    for a in range(len(arg)):   # the axis must survive whole, with the same elements in front of it
      if arg[a] == shp[axis] and prod(arg[:a]) == before: return a, lambda i, a=a: arg[:a] + (sizes[i],) + arg[a + 1:]
    return None
  if op is Ops.EXPAND and arg[axis] == shp[axis]: return axis, lambda i: arg[:axis] + (sizes[i],) + arg[axis + 1:]
  if op is Ops.PAD and arg[axis] == (0, 0): return axis, lambda i: arg
  if op is Ops.SHRINK and arg[axis] == (0, shp[axis]): return axis, lambda i: arg[:axis] + ((0, sizes[i]),) + arg[axis + 1:]
  if op is Ops.FLIP and not arg[axis]: return axis, lambda i: arg
  return None

def _movement(u: UOp, m: UOp) -> UOp:
  axis, devices = m.arg
  if axis is not None and (kept := _keep_axis(u, axis, [shape_of(s)[axis] for s in m.src])) is not None:
    return _per_device(u, [m], devices, kept[0], kept[1])
  return _per_device(u, [relayout(m, None)], devices, None)

def _copy(u: UOp) -> UOp | None:
  x, to = u.src[0], u.arg
  if x.op is Ops.MULTI:
    if isinstance(to, str): return gather(x, to)
    if to == x.arg[1]: return x
    whole = gather(x, to[0])   # to another device tuple: through its first device
    return multi([copy_to(whole, d) for d in to], None, to)
  if isinstance(to, tuple): return multi([copy_to(x, d) for d in to], None, to)   # replicate a single-device value
  return None

def _mselect(u: UOp, m: UOp) -> UOp:
  i, axis = u.arg
  return relayout(m, axis).src[i]

def _any_op(u: UOp) -> UOp | None:
  # constants made for a device tuple, and ops without a rule of their own: once per device, on whole values
  if u.op in (Ops.MULTI, Ops.SINK) or not any(s.op is Ops.MULTI or (s.op is Ops.DEVICE and isinstance(s.arg, tuple)) for s in u.src): return None
  devices = _devices_of(u)
  return _per_device(u, [relayout(s, None) if s.op is Ops.MULTI else s for s in u.src], devices, None)

pm_multi = PatternMatcher([
  (UPat(tuple(GroupOp.Elementwise | {Ops.CONTIGUOUS, Ops.DETACH, Ops.ASSIGN}), name="u"), _elementwise),
  (UPat(Ops.REDUCE_AXIS, src=(UPat(Ops.MULTI, name="m"),), name="u"), _reduce),
  (UPat(tuple(GroupOp.Movement), src=(UPat(Ops.MULTI, name="m"),), name="u"), _movement),
  (UPat(Ops.COPY, name="u"), _copy),
  (UPat(Ops.MSELECT, src=(UPat(Ops.MULTI, name="m"),), name="u"), _mselect),
  (UPat(None, name="u"), _any_op),
])

def lower(u: UOp) -> UOp:
  """u with every sharded op lowered: a MULTI of single-device graphs (u on a device tuple), or a single-device graph."""
  return graph_rewrite(u, pm_multi) if u.has_multi else u

def sharding(u: UOp) -> tuple[int | None, tuple[str, ...]] | None:
  """(axis, devices) of a value on a device tuple (None for a single-device one), found by lowering its graph."""
  if not isinstance(u.device, tuple): return None
  return lower(u).arg

def lower_targets(uops: list[UOp]) -> tuple[list[UOp], Callable[[list[UOp]], list[UOp]]]:
  """The single-device graphs to realize for `uops` (each sharded one gives its shards), and the function that puts the
  realized shards back together as MULTI nodes, one per input."""
  if not any(u.has_multi for u in uops): return uops, lambda outs: outs
  lowered = list(graph_rewrite(UOp(Ops.SINK, dtypes.void, tuple(uops)), pm_multi).src)   # one rewrite: shared subgraphs lowered once
  flat = [s for u in lowered for s in (u.src if u.op is Ops.MULTI else (u,))]
  def regroup(outs: list[UOp]) -> list[UOp]:
    it, ret = iter(outs), []
    for u in lowered: ret.append(multi([next(it) for _ in u.src], *u.arg) if u.op is Ops.MULTI else next(it))
    return ret
  return flat, regroup
