"""The interpreter: runs a linearized program over a global x local grid, vectorized with numpy over lanes.

A batch of whole workgroups runs together, one numpy array per register (lanes on axis 0, vector elements on axis 1).
Loop bounds are uniform, so RANGE/END are ordinary Python loops; divergence is a lane mask (retired threads, IF,
load/store gates). Lanes run in lockstep, so a barrier can't deadlock or reorder anything: instead local memory
records which thread last wrote/read each address in the current barrier epoch, and a cross-thread access with no
barrier between is reported as a missing barrier (a data race on real hardware)."""
from __future__ import annotations
from typing import Callable
import numpy as np
from tinycore.uop import Ops, GroupOp
from tinycore.dtype import dtypes, PtrDType
from tinycore.helpers import prod, getenv
from tinycore.emulator.alu import alu, cast, bitcast, reg_np, mem_np, to_mem, from_mem
from tinycore.emulator.errors import EmulatorError, OutOfBounds, UninitializedRead, MissingBarrier
from tinycore.emulator.model import ExecModel
from tinycore.emulator import shared_ops

MAX_LANES = getenv("EMU_LANES", 1 << 15)   # lanes (threads) interpreted per numpy op

class _Local:
  """One DEFINE_LOCAL for a batch of `groups` workgroups: data, init bits and the race-tracking state."""
  def __init__(self, dt: PtrDType, groups: int):
    self.size, n = dt.size, dt.size * groups
    self.data = np.zeros(n, mem_np(dt.base))
    self.init = np.zeros(n, bool)
    self.w_tid, self.w_ep, self.r_ep = np.full(n, -1), np.full(n, -1), np.full(n, -1)
    self.r_min, self.r_max = np.zeros(n, np.int64), np.zeros(n, np.int64)
    self.pending = np.zeros(n, np.int32)   # asynchronous copies in flight into each address (shared_ops.py)

class Interpreter:
  def __init__(self, nodes: list, model: ExecModel, name: str = "kernel"):
    self.nodes, self.model, self.name = nodes, model, name
    self.pos = {id(n): i for i, n in enumerate(nodes)}
    self.end_of, self.range_of = {}, {}
    for i, n in enumerate(nodes):
      if n.op is Ops.END: r = self.pos[id(n.src[0])]; self.end_of[r], self.range_of[i] = i, r
    self.acc_of = {id(n.src[0]): i for i, n in enumerate(nodes) if n.op is Ops.DEFINE_REG}   # REDUCE -> its accumulator
    self.vars = sorted((n for n in nodes if n.op is Ops.DEFINE_VAR), key=lambda v: v.arg[0])
    gl = sorted({n.arg for n in nodes if n.op is Ops.DEFINE_GLOBAL})
    self.buf_slot = {a: i for i, a in enumerate(gl)}   # buffers come in buffer-number order
    self._check_access_types()
    local_bytes = sum(n.dtype.size * n.dtype.base.itemsize for n in nodes if n.op is Ops.DEFINE_LOCAL)
    if local_bytes > model.local_mem: raise EmulatorError(f"{name}: {local_bytes} bytes of local memory, {model.name} has {model.local_mem}")

  def _check_access_types(self):
    """A load/store moves values of its buffer's element type (n of them for an n-wide INDEX): anything else would
    reinterpret memory on a real device, so it is a malformed program, reported before any thread runs."""
    for i, u in enumerate(self.nodes):
      if u.op not in (Ops.LOAD, Ops.STORE) or not u.src or u.src[0].op is not Ops.INDEX: continue
      ind = u.src[0]
      if not ind.src or ind.src[0].op not in (Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL): continue
      if isinstance(ind.arg, tuple) and ind.arg and ind.arg[0] == "ldmatrix":   # n elements gathered across the warp
        base = ind.src[0].dtype.base.scalar()   # 4 bytes a lane per matrix: 2 16-bit or 4 8-bit elements
        if u.op is not Ops.LOAD or u.dtype.scalar() != base or base.itemsize not in (1, 2) or u.dtype.count != 4 // base.itemsize * ind.arg[1]:
          raise EmulatorError(f"{self.name}: op {i} ldmatrix of {ind.arg[1]} matrices can't give {u.dtype}")
        continue
      n = ind.arg[1] if isinstance(ind.arg, tuple) and ind.arg and ind.arg[0] == "vec" else 1
      val = u.dtype if u.op is Ops.LOAD else u.src[1].dtype if len(u.src) > 1 else None
      base = ind.src[0].dtype.base
      if val is not None and (val.scalar() != base.scalar() or val.count not in (n, 1) or (u.op is Ops.LOAD and val.count != n)):
        where = f"buffer {ind.src[0].arg}" if ind.src[0].op is Ops.DEFINE_GLOBAL else f"local {self.pos[id(ind.src[0])]}"
        raise EmulatorError(f"{self.name}: op {i} {u.op.name} moves {val} through {where} of {base}"
                            + (f" ({n}-wide index)" if n > 1 else ""))

  # ***** thread ids, for error messages
  def _thread(self, lane: int) -> str:
    g, l = self.g0 + lane // self.L, lane % self.L
    gs, ls = self.gs, self.ls
    gi = (g % gs[0], g // gs[0] % gs[1], g // (gs[0] * gs[1])); li = (l % ls[0], l // ls[0] % ls[1], l // (ls[0] * ls[1]))
    gid = tuple(g * n + l for g, n, l in zip(gi, ls, li))
    return f"thread group {gi} local {li}, global {gid}"
  def _fail(self, cls, lanes: np.ndarray, msg: Callable[[int], str]):
    lane = int(np.flatnonzero(lanes)[0])
    raise cls(f"{self.name}: {msg(lane)} ({self._thread(lane)})")

  def run(self, bufs: tuple, gs: tuple, ls: tuple, vals: tuple):
    gs, ls = tuple(int(x) for x in gs) + (1,) * (3 - len(gs)), tuple(int(x) for x in ls) + (1,) * (3 - len(ls))
    self.gs, self.ls, self.L = gs, ls, prod(ls)
    if self.L > self.model.max_workgroup:
      raise EmulatorError(f"{self.name}: workgroup of {self.L} threads, {self.model.name} allows {self.model.max_workgroup}")
    if len(bufs) != len(self.buf_slot): raise EmulatorError(f"{self.name}: called with {len(bufs)} buffers, takes {len(self.buf_slot)}")
    self.mem, self.nbytes = dict[int, np.ndarray](), dict[int, int]()
    for n in self.nodes:
      if n.op is Ops.DEFINE_GLOBAL and n.arg not in self.mem:
        b = memoryview(bufs[self.buf_slot[n.arg]]).cast("B")
        # whole elements only: the bytes of a trailing partial element are out of bounds for this dtype
        dt = np.dtype(mem_np(n.dtype.base))
        self.mem[n.arg], self.nbytes[n.arg] = np.frombuffer(b, dtype=dt, count=len(b) // dt.itemsize), len(b)
    self.varvals = {id(v): val for v, val in zip(self.vars, vals)}
    G = prod(gs)
    B = max(1, min(G, MAX_LANES // self.L))
    with np.errstate(all="ignore"):
      for g0 in range(0, G, B): self._batch(g0, min(B, G - g0))

  def _batch(self, g0: int, B: int):
    self.g0, N, L = g0, B * self.L, self.L
    lane = np.arange(N)
    g, l = g0 + lane // L, lane % L
    gs, ls = self.gs, self.ls
    self.gid = (g % gs[0], g // gs[0] % gs[1], g // (gs[0] * gs[1]))
    self.lid = (l % ls[0], l // ls[0] % ls[1], l // (ls[0] * ls[1]))
    self.N, self.lane, self.grp = N, lane, lane // L
    self.active = np.ones(N, bool)
    self.ifs: list[np.ndarray] = []
    self.epoch = 0
    self.async_open: list = []; self.async_groups: list = []
    self.group_bounds: dict[int, np.ndarray] = {}   # RANGE -> per-lane trip count where it differs between workgroups
    self.locals: dict[int, _Local] = {}
    v: list = [None] * len(self.nodes)
    self.v = v
    nodes, pos = self.nodes, self.pos
    loops: dict[int, int] = {}
    self.pc = 0
    try: self._exec(nodes, pos, v, loops, N)
    except (TypeError, ValueError, IndexError) as e:   # a malformed program: say which op, not just numpy's complaint
      u = nodes[self.pc]
      early = "" if all(v[pos[id(s)]] is not None for s in u.src if id(s) in pos) else " (a source was used before it was computed)"
      raise EmulatorError(f"{self.name}: op {self.pc} {u.op.name} {u.dtype}: {type(e).__name__}: {e}{early}") from e

  def _exec(self, nodes, pos, v, loops, N):
    pc = 0
    while pc < len(nodes):
      self.pc = pc
      u = nodes[pc]
      op = u.op
      if op in GroupOp.ALU:
        a = [v[pos[id(s)]] for s in u.src]
        if u.dtype.count > 1: a = [x[:, None] if s.dtype.count == 1 and np.ndim(x) == 1 else x for x, s in zip(a, u.src)]
        r = alu(op, u.dtype, a)
        v[pc] = r if op in GroupOp.Comparison else np.asarray(r).astype(reg_np(u.dtype), copy=False)
      elif op is Ops.CONST:
        c = np.asarray(u.arg, reg_np(u.dtype))
        v[pc] = np.full(u.dtype.count, c) if u.dtype.count > 1 else c
      elif op is Ops.INDEX or op is Ops.DEFINE_GLOBAL or op is Ops.NOOP: pass
      elif op is Ops.LOAD: v[pc] = self._load(u)
      elif op is Ops.STORE: self._store(u)
      elif op is Ops.RANGE:
        bound = v[pos[id(u.src[0])]]
        if np.ndim(bound) != 0: bound = self._group_bound(pc, bound)
        else: self.group_bounds.pop(pc, None)
        loops[pc] = int(bound)
        if loops[pc] <= 0: pc = self.end_of[pc] + 1; continue
        v[pc] = np.int64(0)
        if pc in self.group_bounds: self._push_trip(pc, 0)
      elif op is Ops.END:
        r = self.range_of[pc]
        if r in self.group_bounds: self.ifs.pop()
        if (i := int(v[r]) + 1) < loops[r]:
          v[r] = np.int64(i)
          if r in self.group_bounds: self._push_trip(r, i)
          pc = r + 1; continue
      elif op is Ops.DEFINE_REG:
        shape = (N, u.dtype.count) if u.dtype.count > 1 else (N,)
        v[pc] = np.full(shape, u.arg[1], reg_np(u.dtype))
      elif op is Ops.ASSIGN:
        acc, new = pos[id(u.src[0])], v[pos[id(u.src[1])]]
        if self.ifs: m = self.ifs[-1]; new = np.where(m[:, None] if np.ndim(new) == 2 else m, new, v[acc])
        v[acc] = v[pc] = np.broadcast_to(new, v[acc].shape).astype(v[acc].dtype)
      elif op is Ops.REDUCE: v[pc] = v[self.acc_of[id(u)]]
      elif op is Ops.SPECIAL: v[pc] = self._special(u)
      elif op is Ops.DEFINE_VAR:
        if id(u) not in self.varvals: raise EmulatorError(f"{self.name}: no value for variable {u.arg[0]}")
        v[pc] = np.asarray(self.varvals[id(u)], reg_np(u.dtype))
      elif op is Ops.DEFINE_LOCAL: self.locals[pc] = _Local(u.dtype, N // self.L)
      elif op is Ops.CAST: v[pc] = cast(v[pos[id(u.src[0])]], u.src[0].dtype, u.dtype)
      elif op is Ops.BITCAST: v[pc] = bitcast(v[pos[id(u.src[0])]], u.src[0].dtype, u.dtype)
      elif op is Ops.VECTORIZE: v[pc] = np.stack([np.broadcast_to(v[pos[id(s)]], (N,)) for s in u.src], -1).astype(reg_np(u.dtype))
      elif op is Ops.GEP:
        x, idx = np.broadcast_to(v[pos[id(u.src[0])]], (N, u.src[0].dtype.count)), u.arg
        v[pc] = x[:, idx[0]] if isinstance(idx, tuple) and len(idx) == 1 else x[:, idx]
      elif op is Ops.IF:
        c = np.broadcast_to(v[pos[id(u.src[0])]], (N,)).astype(bool)
        self.ifs.append(c & self.ifs[-1] if self.ifs else c)
      elif op is Ops.ENDIF: self.ifs.pop()
      elif op is Ops.BARRIER:
        if u.arg is None: self._barrier()
        elif u.arg[0] == "async_commit": shared_ops.commit(self)
        elif u.arg[0] == "async_wait": shared_ops.wait(self, int(u.arg[1]))
        else: raise EmulatorError(f"{self.name}: unknown barrier {u.arg!r}")
      elif op is Ops.WMMA: v[pc] = self._wmma(u)
      elif op is Ops.CUSTOM and isinstance(u.arg, tuple) and u.arg and u.arg[0] == "warp_xor": v[pc] = shared_ops.warp_xor(self, u)
      elif op is Ops.SINK: pass
      else: raise EmulatorError(f"{self.name}: the emulator can't execute {op.name}")
      pc += 1

  # ***** threads and control
  def _group_bound(self, pc: int, bound) -> int:
    """A loop whose trip count is uniform within each workgroup but not across the batch (it depends on the group id):
    it runs the largest count, a group past its own count masked off like an IF. Differing within a group is an error."""
    b = np.broadcast_to(bound, (self.N,)).astype(np.int64)
    act = self.active.reshape(-1, self.L)
    per = np.where(act, b.reshape(-1, self.L), np.iinfo(np.int64).min)
    first = per.max(1, keepdims=True)
    if (act & (per != first)).any(): raise EmulatorError(f"{self.name}: loop bound differs between threads of a workgroup")
    self.group_bounds[pc] = b
    return int(b[self.active].max()) if self.active.any() else 0
  def _push_trip(self, pc: int, i: int):
    m = i < self.group_bounds[pc]
    self.ifs.append(m & self.ifs[-1] if self.ifs else m)
  def _special(self, u):
    name = u.arg[0] if isinstance(u.arg, tuple) else u.arg
    dim = int(name[-1])
    if name.startswith("lidx"): idx = self.lid[dim]
    elif isinstance(u.arg, tuple) and len(u.arg) > 1:
      if u.arg[1] != self.ls[dim]: raise EmulatorError(f"{self.name}: {name} expects local size {u.arg[1]}, launched with {self.ls[dim]}")
      idx = self.gid[dim] * self.ls[dim] + self.lid[dim]
    else: idx = self.gid[dim]
    bound = self.v[self.pos[id(u.src[0])]] if u.src else None
    if bound is not None: self.active = self.active & (idx < bound)   # threads past the bound retire here
    return idx.astype(np.int64)
  def _mask(self, gate=None) -> np.ndarray:
    m = self.active & self.ifs[-1] if self.ifs else self.active
    return m if gate is None else m & np.broadcast_to(gate, (self.N,))
  def _barrier(self):
    if self.ifs:
      m = self.ifs[-1] | ~self.active   # retired threads count as arrived
      per = m.reshape(-1, self.L)
      if (bad := per.any(1) & ~per.all(1)).any():
        self._fail(EmulatorError, np.repeat(bad, self.L) & ~m, lambda l: "barrier in divergent control flow: this thread never reaches it")
    self.epoch += 1

  # ***** memory
  def _addr(self, u):
    """(region, per-lane addresses (N,) or (N, n), mask, elementwise dtype, buffer label) of an INDEX."""
    ind = u.src[0]
    buf, idx = ind.src[0], np.broadcast_to(self.v[self.pos[id(ind.src[1])]], (self.N,)).astype(np.int64)
    gate = self.v[self.pos[id(ind.src[2])]] if len(ind.src) > 2 else None
    n = ind.arg[1] if isinstance(ind.arg, tuple) and ind.arg and ind.arg[0] == "vec" else 1
    if n > 1: idx = idx[:, None] + np.arange(n)
    m = self._mask(gate)
    dt = buf.dtype.base
    if buf.op is Ops.DEFINE_GLOBAL: region, size, label, nbytes = None, self.mem[buf.arg].size, f"buffer {buf.arg}", self.nbytes[buf.arg]
    elif buf.op is Ops.DEFINE_LOCAL:
      region = self.locals[self.pos[id(buf)]]
      size, label = region.size, f"local {self.pos[id(buf)]}"
      nbytes = size * dt.itemsize
    else: raise EmulatorError(f"{self.name}: can't address {buf.op.name}")
    mm = np.broadcast_to(m[:, None], idx.shape) if n > 1 else m
    # only lanes that really access (active, inside IF, gate true) are checked: a gated-off lane's index may be anything
    if (oob := mm & ((idx < 0) | (idx >= size))).any():
      lanes = oob.any(1) if n > 1 else oob
      bad = lambda l: int(idx[l][np.flatnonzero(oob[l])[0]] if n > 1 else idx[l])
      what = f"{n}-wide " if n > 1 else ""
      self._fail(OutOfBounds, lanes, lambda l: f"out-of-bounds {what}{u.op.name.lower()} of {label} at index {bad(l)} (size {size}): "
                 f"{dt.name} at byte {bad(l) * dt.itemsize}, the {label.split()[0]} has {nbytes} bytes")
    if isinstance(ind.arg, tuple) and len(ind.arg) == 3 and ind.arg[0] == "vec":   # a vector access the device does in one piece
      shared_ops.check_aligned(self, idx, mm, dt.itemsize, ind.arg[2], f"{n * dt.itemsize}-byte {u.op.name.lower()} of {label}")
    if region is not None: idx = idx + (self.grp[:, None] if n > 1 else self.grp) * size   # each workgroup its own copy
    return region, idx, mm, dt, label, n

  def _load(self, u):
    if isinstance(u.src[0].arg, tuple) and u.src[0].arg and u.src[0].arg[0] == "ldmatrix": return shared_ops.ldmatrix(self, u)
    region, idx, mm, dt, label, n = self._addr(u)
    safe = np.where(mm, idx, 0)
    if region is None:
      data = self.mem[u.src[0].src[0].arg]
      raw = data[safe] if data.size else np.zeros(safe.shape, data.dtype)
    else:
      a, t = safe[mm], np.broadcast_to(self.lane[:, None] if n > 1 else self.lane, safe.shape)[mm]
      shared_ops.check_not_pending(self, region, a, t, label, "read of")   # before init: an in-flight copy hasn't written yet
      if (bad := ~region.init[a]).any():
        self._fail(UninitializedRead, self._lanes_of(mm, bad), lambda l: f"read of uninitialized {label} at index {int(a[bad][0]) % region.size}")
      self._check_race(region, a, t, write=False, label=label)
      raw = region.data[safe]
    return np.where(mm, from_mem(raw, dt), 0).astype(reg_np(u.dtype))

  def _store(self, u):
    region, idx, mm, dt, label, n = self._addr(u)
    val = np.broadcast_to(self.v[self.pos[id(u.src[1])]], idx.shape)
    bits = to_mem(val, dt)
    if u.arg == "async": return shared_ops.issue_copy(self, u, region, idx, mm, bits, label)
    if region is None: self.mem[u.src[0].src[0].arg][idx[mm]] = bits[mm]
    else:
      a, t = idx[mm], np.broadcast_to(self.lane[:, None] if n > 1 else self.lane, idx.shape)[mm]
      shared_ops.check_not_pending(self, region, a, t, label, "write to")
      self._check_race(region, a, t, write=True, label=label)
      region.data[a], region.init[a] = bits[mm], True
      region.w_tid[a], region.w_ep[a] = t, self.epoch

  def _lanes_of(self, mm, sel):
    """Lane mask of the flattened selected elements `sel` (indices into mm's True positions)."""
    lanes = np.zeros(self.N, bool)
    lanes[np.nonzero(mm)[0][sel]] = True
    return lanes
  def _check_race(self, r: _Local, a, t, write: bool, label: str):
    ep = self.epoch
    def report(bad, what, other):
      i = int(np.flatnonzero(bad)[0])
      self._fail(MissingBarrier, self.lane == t[i], lambda l: f"missing barrier: {what} {label} index {int(a[i]) % r.size} "
                 f"{'written' if other is r.w_tid else 'read'} by {self._thread(int(other[a[i]]))} with no barrier between")
    if (bad := (r.w_ep[a] == ep) & (r.w_tid[a] != t)).any(): report(bad, "write to" if write else "read of", r.w_tid)
    if write:
      if (bad := (r.r_ep[a] == ep) & ((r.r_min[a] != t) | (r.r_max[a] != t))).any():
        rd = np.where(r.r_min[a] != t, r.r_min[a], r.r_max[a])
        i = int(np.flatnonzero(bad)[0])
        self._fail(MissingBarrier, self.lane == t[i], lambda l: f"missing barrier: write to {label} index {int(a[i]) % r.size} read by "
                                                                f"{self._thread(int(rd[i]))} with no barrier between")
      o = np.argsort(a, kind="stable")
      if (dup := (a[o][1:] == a[o][:-1]) & (t[o][1:] != t[o][:-1])).any():
        i = o[1:][dup][0]
        self._fail(MissingBarrier, self.lane == t[i], lambda l: f"race: threads write {label} index {int(a[i]) % r.size} in the same step")
    else:
      fresh = r.r_ep[a] != ep
      fa = a[fresh]
      r.r_min[fa], r.r_max[fa], r.r_ep[fa] = np.iinfo(np.int64).max, -1, ep
      np.minimum.at(r.r_min, a, t); np.maximum.at(r.r_max, a, t)

  # ***** tensor cores
  def _wmma(self, u):
    name = u.arg[0] if isinstance(u.arg, tuple) else u.arg
    tc = self.model.tc(name)
    T, (M, Nn, K) = tc.threads, tc.dims
    if self.L % T: raise EmulatorError(f"{self.name}: WMMA {name} needs workgroups of a multiple of {T} threads, got {self.L}")
    m = self._mask().reshape(-1, T)
    if (bad := m.any(1) & ~m.all(1)).any():
      self._fail(EmulatorError, np.repeat(bad, T) & ~m.reshape(-1), lambda l: f"WMMA {name} with inactive lanes in the warp")
    W = self.N // T
    ops = [np.broadcast_to(self.v[self.pos[id(s)]], (self.N, s.dtype.count)).reshape(W, T, -1).astype(np.float32) for s in u.src[:3]]
    lay = [np.array(x) for x in (tc.a, tc.b, tc.c)]
    A, Bm, C = np.zeros((W, M, K), np.float32), np.zeros((W, K, Nn), np.float32), np.zeros((W, M, Nn), np.float32)
    for mat, l, x in ((A, lay[0], ops[0]), (Bm, lay[1], ops[1]), (C, lay[2], ops[2])): mat[:, l[..., 0], l[..., 1]] = x
    if tc.round_inputs is not None: A, Bm = tc.round_inputs(A), tc.round_inputs(Bm)
    D = cast(A @ Bm + C, dtypes.float32, tc.dtype_out)   # fp32 accumulate, rounded to the output type
    return D[:, lay[2][..., 0], lay[2][..., 1]].reshape(self.N, -1).astype(reg_np(u.dtype))
