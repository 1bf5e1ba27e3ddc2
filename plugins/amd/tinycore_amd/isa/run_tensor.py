"""Running a tinycore Tensor's schedule on the ISA emulator: each kernel is rendered for an AMD arch, compiled to a code
object and dispatched instruction by instruction; inputs come from the buffers the tensor's sources already hold.

For tests and measurements (`realize_on_isa(t, renderer)` -> numpy result, stats); the KFD runtime with MOCKGPU=1
is the device-level path. Kernel arguments are packed at the offsets the code object's metadata gives."""
from __future__ import annotations
import time
from dataclasses import dataclass, field
import numpy as np
from tinycore.uop import Ops
from tinycore_amd.isa.dispatch import dispatch, DispatchStats
from tinycore_amd.isa.memory import ArenaMemory

@dataclass
class RunReport:
  stats: DispatchStats = field(default_factory=DispatchStats)
  kernels: list = field(default_factory=list)      # (name, global, local, instructions)
  seconds: float = 0.0                             # in the emulator only (compiling excluded)
  libs: list = field(default_factory=list)         # the code objects, for decode checks

def _int(x) -> int:
  if not isinstance(x, int): raise ValueError(f"symbolic launch size {x!r}: bind the variables first")
  return x

def realize_on_isa(t, renderer, opts: tuple | None = None, fill=None) -> tuple[np.ndarray, RunReport]:
  """Compute tensor t with every kernel of its schedule run on the emulator for renderer.arch; returns (values, report).
  An input buffer that holds no data yet (Tensor.empty) starts zeroed, or as fill(nbytes) -> uint8 array."""
  from tinycore.codegen import get_program
  from tinycore_amd.codeobject import read
  sched = t.contiguous().schedule() if t.uop.op is not Ops.BUFFER else t.schedule()
  mem = ArenaMemory()
  where: dict[int, int] = {}   # id(base Buffer) -> arena address
  def addr(buf) -> int:
    base = buf.base
    if id(base) not in where:
      a = mem.alloc(base.nbytes)
      data = np.frombuffer(bytes(base.as_buffer()), np.uint8) if base.is_allocated() else \
        (np.asarray(fill(base.nbytes), np.uint8) if fill is not None else np.zeros(0, np.uint8))
      if len(data): mem.store(np.array([a], np.uint64), data.reshape(1, -1))
      where[id(base)] = a
    return where[id(base)] + buf.offset
  rep = RunReport()
  out_buf = None
  for si in sched:
    if si.is_copy:
      dst, src = si.bufs[0], si.bufs[1]
      data = mem.load(np.array([addr(src)], np.uint64), src.nbytes) if src.nbytes else np.zeros((1, 0), np.uint8)
      if src.nbytes: mem.store(np.array([addr(dst)], np.uint64), data)
      out_buf = dst
      continue
    p = get_program(si.ast, renderer, opts)
    lib = renderer.compiler.compile(p.src)
    rep.libs.append(lib)
    k = read(lib).kernels[p.name]
    args = [a for a in k.args if not a.get(".value_kind", "").startswith("hidden_")]
    vals = [si.var_vals[v] for v in p.vars]
    values = [addr(b) for b in si.bufs] + [int(v) for v in vals]
    if len(args) != len(values): raise ValueError(f"{p.name}: {len(args)} kernel arguments but {len(values)} values")
    ka = bytearray(max(k.kernarg_size, 8))
    for a, v in zip(args, values): ka[a[".offset"]:a[".offset"] + a[".size"]] = (v & ((1 << 8 * a[".size"]) - 1)).to_bytes(a[".size"], "little")
    ka_addr = mem.put(np.frombuffer(bytes(ka), np.uint8))
    gs, ls = tuple(_int(x) for x in p.global_size), tuple(_int(x) for x in p.local_size)
    st = time.perf_counter()
    s = dispatch(lib, p.name, renderer.arch, gs, ls, ka_addr, mem)
    rep.seconds += time.perf_counter() - st
    rep.stats.instructions += s.instructions
    rep.stats.opcodes |= s.opcodes
    rep.stats.waves += s.waves
    rep.stats.workgroups += s.workgroups
    rep.kernels.append((p.name, gs, ls, s.instructions))
    out_buf = si.bufs[0]
  if out_buf is None: raise ValueError("nothing to run: the tensor is already a buffer")
  raw = mem.load(np.array([addr(out_buf)], np.uint64), out_buf.nbytes)[0]
  dt = t.dtype
  if dt.fmt is None:   # bfloat16 / fp8: bits in memory
    return raw.view(np.uint16 if dt.itemsize == 2 else np.uint8).reshape(t.shape), rep
  return raw.view(dt.np).reshape(t.shape), rep
