"""Multi-device tensors: `Tensor.shard(devices, axis)`.

A sharded tensor's `uop` is a MULTI node: `UOp(Ops.CUSTOM, dtype, shards, ("multi", axis, devices))`, one source per device.
Its `shape` is the full logical shape and its `device` the tuple of device names (both put into the node's derived-property
cache when it is built, since uop.py's inference knows nothing of it). `axis=None` means every shard holds the whole tensor.

Ops are pushed down eagerly, when the Tensor that holds them is built (`on_tensor`, called from Tensor.__init__): a UOp
with MULTI sources becomes a MULTI of per-shard UOps, so nothing downstream (scheduler, codegen) sees a MULTI node, and
an unsupported op raises NotImplementedError at the call that made it, naming the op.

Semantics:
  - shards split the axis like numpy.array_split (the first size % n shards get one extra row); every shard must be
    non-empty, else ValueError.
  - elementwise ops and casts run per shard; a replicated (axis=None) operand is shrunk to each shard's rows; scalars and
    constants are broadcast per shard; mixing with a single-device tensor, or with one sharded on another axis, raises.
  - a reduction over a sharded axis reduces per shard, copies the partials to the first device, combines them there and
    copies the result back to every device: the result is REPLICATED (axis=None) on the same devices (an all-reduce).
  - movement ops that keep the sharded axis whole run per shard (reshape keeps it when it is neither split nor merged,
    permute remaps it); pad/shrink/flip of the sharded axis raise NotImplementedError.
  - `.to(device)` / `.numpy()` gather: shards are copied to one device and concatenated.
  - not supported: autograd through sharded tensors, assign into a sharded buffer, random/empty creation on a device tuple.
"""
from __future__ import annotations
from tinycore.uop import UOp, Ops, GroupOp
from tinycore.helpers import prod
from tinycore.dtype import dtypes

ACTIVE = False   # set once anything is sharded: until then Tensor.__init__ skips the MULTI check entirely

def is_multi(u) -> bool: return isinstance(u, UOp) and u.op is Ops.CUSTOM and isinstance(u.arg, tuple) and len(u.arg) == 3 and u.arg[0] == "multi"

def bounds(size: int, n: int) -> list[tuple[int, int]]:
  """Per-shard [start, end) of an axis of `size` split over n devices, like numpy.array_split."""
  if size < n: raise ValueError(f"can't shard an axis of size {size} over {n} devices: a shard would be empty")
  q, r = divmod(size, n)
  out, s = [], 0
  for i in range(n): out.append((s, s + q + (i < r))); s += q + (i < r)
  return out

def make_multi(shards, axis: int | None, devices: tuple[str, ...]) -> UOp:
  global ACTIVE
  ACTIVE = True
  shp = shards[0].shape
  full = shp if axis is None else shp[:axis] + (sum(s.shape[axis] for s in shards),) + shp[axis + 1:]
  for sh in shards: sh.device   # cache it now, while the sources' are cached: uop.py's lookup recurses down long chains
  u = UOp(Ops.CUSTOM, shards[0].dtype, tuple(shards), ("multi", axis, tuple(devices)))
  u._c["shape"], u._c["device"], u._c["tc_multi"] = full, tuple(devices), True   # uop.py can't infer these
  return u

def _axis_view(u: UOp, axis: int, b: int, e: int) -> UOp: return u.shrink(tuple((b, e) if i == axis else (0, s) for i, s in enumerate(u.shape)))
def _to(u: UOp, device: str) -> UOp: return u if u.device == device else UOp(Ops.COPY, u.dtype, (u,), device)
def _tuple_leaf(n: UOp) -> bool: return (n.op is Ops.DEVICE and isinstance(n.arg, tuple)) or _placeholder(n)
def _placeholder(n: UOp) -> bool: return n.op is Ops.BUFFER and isinstance(n.arg.device, tuple) and not n.arg.is_allocated()
def _const_only(u: UOp) -> bool:
  # constants, or an empty() made for a device tuple (a buffer placeholder): both can be made on each device directly
  return not any(n.op in (Ops.BUFFER, Ops.COPY, Ops.ASSIGN, Ops.CUSTOM) and not _placeholder(n) for n in u.toposort())
def _on_device(u: UOp, device: str) -> UOp:
  """A constant-only graph made on `device` by rewriting its DEVICE leaves and buffer placeholders (no copy)."""
  from tinycore.device import Buffer
  return u.substitute({n: UOp(Ops.DEVICE, arg=device) if n.op is Ops.DEVICE else UOp(Ops.BUFFER, n.dtype, (), Buffer(device, n.arg.size, n.dtype))
                       for n in u.toposort() if n.op is Ops.DEVICE or _placeholder(n)})

# ---- shard / gather
def shard(u: UOp, devices: tuple[str, ...], axis: int | None) -> UOp:
  if not devices: raise ValueError("shard needs at least one device")
  if len(set(devices)) != len(devices): raise ValueError(f"shard devices must be distinct, got {devices}")
  if is_multi(u):
    if u.arg[1:] == (axis, devices): return u
    u = gather(u, devices[0])   # reshard through the first device
  if _const_only(u): shards = [_on_device(u, d) for d in devices]   # constants are made on each device, not copied
  elif axis is None: shards = [_to(u, d) for d in devices]
  else: shards = [_to(_axis_view(u, axis, b, e), d) for d, (b, e) in zip(devices, bounds(u.shape[axis], len(devices)))]
  return make_multi(shards, axis, devices)

def gather(u: UOp, device: str) -> UOp:
  """The whole tensor on one device: each shard copied there, then concatenated (pad + add, like Tensor.cat)."""
  _, axis, _ = u.arg
  if axis is None: return _to(u.src[0], device)
  full, out, off = u.shape[axis], None, 0
  for s in u.src:
    n = s.shape[axis]
    p = _to(s, device).pad(tuple((off, full - off - n) if i == axis else (0, 0) for i in range(len(s.shape))))
    out = p if out is None else UOp(Ops.OR if out.dtype == dtypes.bool else Ops.ADD, out.dtype, (out, p))
    off += n
  return out

# ---- pushing ops down to the shards
def has_multi(u: UOp) -> bool:
  """Whether u's graph holds a MULTI node or a leaf made for a device tuple, memoized per node; the walk stops at nodes
  already known (and at MULTI nodes). Never asks uop.py's `device`, which recurses down long uncached chains."""
  if (r := u._c.get("tc_multi")) is not None: return r
  order, seen, stack = [], set(), [(u, False)]
  while stack:
    n, done = stack.pop()
    if done: order.append(n); continue
    if n in seen or n._c.get("tc_multi") is not None: continue
    seen.add(n)
    if is_multi(n) or _tuple_leaf(n): n._c["tc_multi"] = True; continue
    stack.append((n, True))
    stack.extend((s, False) for s in n.src if s not in seen and s._c.get("tc_multi") is None)
  for n in order:
    if n._c.get("tc_multi") is None: n._c["tc_multi"] = any(s._c.get("tc_multi") for s in n.src)
  return u._c["tc_multi"]

def on_tensor(u: UOp, devices: tuple | None = None) -> UOp:
  """Tensor.__init__'s hook: push MULTI sources down; make a constant on a device tuple a replicated MULTI; shard data
  built for a device tuple (Tensor(data, device=(...)) replicates, like tinygrad)."""
  if devices is not None: return shard(u, devices, None)
  return lower(u) if has_multi(u) and not is_multi(u) else u

def lower(u: UOp) -> UOp:
  memo: dict[UOp, UOp] = {}
  for n in _order(u):
    if is_multi(n) or not n._c.get("tc_multi"): memo[n] = n; continue
    srcs = [memo.get(s, s) for s in n.src]
    memo[n] = _push(n, srcs) if any(is_multi(s) for s in srcs) else n   # above only device-tuple leaves: kept, made below
  if (r := memo[u]) is not u: return r   # pushed down (a MULTI, or a gather's single-device result)
  devices = next(n.arg if n.op is Ops.DEVICE else n.arg.device for n in r.toposort() if _tuple_leaf(n))
  if not _const_only(r): raise NotImplementedError(f"{r.op.name} on the device tuple {devices}: only constants and empty() can be made there directly; shard a tensor instead")
  return make_multi([_on_device(r, d) for d in devices], None, devices)

def _order(u: UOp) -> list[UOp]:
  # post-order of the nodes above the MULTI nodes (the part built since the last Tensor), not of the shards below them
  order, seen, stack = [], set(), [(u, False)]
  while stack:
    n, done = stack.pop()
    if done: order.append(n); continue
    if n in seen: continue
    seen.add(n)
    stack.append((n, True))
    if not is_multi(n) and n._c.get("tc_multi"): stack.extend((s, False) for s in n.src if s not in seen)
  return order

def _as_multi(s: UOp, devices: tuple) -> UOp:
  if is_multi(s):
    if s.arg[2] != devices: raise ValueError(f"sharded tensors are on different devices: {s.arg[2]} and {devices}")
    return s
  if not _const_only(s): raise NotImplementedError(f"can't mix a sharded tensor on {devices} with a tensor on {s.device}: shard it (or .to() it) first")
  return make_multi([_on_device(s, d) for d in devices], None, devices)

def _push(u: UOp, srcs: list[UOp]) -> UOp:
  op, multis = u.op, [s for s in srcs if is_multi(s)]
  devices = multis[0].arg[2]
  if op in GroupOp.Elementwise or op in (Ops.CONTIGUOUS, Ops.DETACH):
    ms = [_as_multi(s, devices) for s in srcs]
    axes = {m.arg[1] for m in ms} - {None}
    if len(axes) > 1: raise NotImplementedError(f"{op.name} of tensors sharded on different axes {sorted(axes)}: reshard one first")
    axis = axes.pop() if axes else None
    full = u.shape[axis] if axis is not None else None
    bnds = bounds(full, len(devices)) if axis is not None else None
    def piece(m: UOp, i: int) -> UOp:
      s = m.src[i]   # a replicated operand is cut down to this shard's rows
      return _axis_view(s, axis, *bnds[i]) if axis is not None and m.arg[1] is None and s.shape and len(s.shape) > axis and s.shape[axis] == full else s
    return make_multi([UOp(op, u.dtype, tuple(piece(m, i) for m in ms), u.arg) for i in range(len(devices))], axis, devices)
  if len(srcs) != 1 or not is_multi(srcs[0]): raise NotImplementedError(f"{op.name} with a sharded source is not supported")
  x = srcs[0]
  _, axis, _ = x.arg
  shp = x.shape
  if op is Ops.COPY: return gather(x, u.arg)
  if op is Ops.REDUCE_AXIS:
    rop, axes = u.arg
    parts = [s.r(rop, axes) for s in x.src]
    if axis is None or axis not in axes: return make_multi(parts, axis, devices)
    if rop not in (Ops.ADD, Ops.MUL, Ops.MAX): raise NotImplementedError(f"reduce {rop.name} over the sharded axis")
    # all-reduce: partials combined on the first device, the result copied back to every device (replicated)
    acc = parts[0]
    for p in parts[1:]: acc = UOp(rop, acc.dtype, (acc, _to(p, devices[0])))
    return make_multi([_to(acc, d) for d in devices], None, devices)
  if op not in GroupOp.Movement: raise NotImplementedError(f"{op.name} is not supported on sharded tensors")
  if axis is None: return make_multi([UOp(op, s.dtype, (s,), u.arg) for s in x.src], None, devices)
  sizes = [s.shape[axis] for s in x.src]
  def per(arg_for): return make_multi([UOp(op, s.dtype, (s,), arg_for(n)) for s, n in zip(x.src, sizes)], new_axis, devices)
  if op is Ops.RESHAPE:
    new, before = u.arg, prod(shp[:axis])
    # the sharded axis must survive whole, with the same elements in front of it (neither split nor merged)
    cand = [i for i in range(len(new)) if new[i] == shp[axis] and prod(new[:i]) == before]
    if not cand: raise NotImplementedError(f"reshape {shp} -> {new} splits or merges the sharded axis {axis}")
    new_axis = cand[0]
    return per(lambda n: new[:new_axis] + (n,) + new[new_axis + 1:])
  if op is Ops.PERMUTE:
    new_axis = u.arg.index(axis)
    return per(lambda n: u.arg)
  new_axis = axis
  if op is Ops.EXPAND:
    if u.arg[axis] != shp[axis]: raise NotImplementedError(f"expand {shp} -> {u.arg} of the sharded axis {axis}")
    return per(lambda n: u.arg[:axis] + (n,) + u.arg[axis + 1:])
  if op is Ops.PAD and u.arg[axis] == (0, 0): return per(lambda n: u.arg)
  if op is Ops.SHRINK and u.arg[axis] == (0, shp[axis]): return per(lambda n: u.arg[:axis] + ((0, n),) + u.arg[axis + 1:])
  if op is Ops.FLIP and not u.arg[axis]: return per(lambda n: u.arg)
  raise NotImplementedError(f"{op.name.lower()} {u.arg} touches the sharded axis {axis} of shape {shp}: gather (.to) or reshard first")

# ---- realize: every shard of every tensor in one schedule
def flatten(uops: list[UOp]) -> list[UOp]: return [s for u in uops for s in (u.src if is_multi(u) else (u,))]
def unflatten(uops: list[UOp], outs: list[UOp]) -> list[UOp]:
  it, ret = iter(outs), []
  for u in uops: ret.append(make_multi([next(it) for _ in u.src], u.arg[1], u.arg[2]) if is_multi(u) else next(it))
  return ret

_NO_GRAD = "autograd through sharded tensors is not supported"
def check_grad(*uops: UOp):
  if any(is_multi(u) for u in uops): raise NotImplementedError(_NO_GRAD)
def check_backward(loss: UOp, leaves: list[UOp]):
  # a sharded leaf's shards (not the MULTI node) are what the loss graph holds: without this its .grad would silently stay None
  ms = [m for m in leaves if is_multi(m)]
  if is_multi(loss) or (ms and any(s in (nodes := set(loss.toposort())) for m in ms for s in m.src)): raise NotImplementedError(_NO_GRAD)
