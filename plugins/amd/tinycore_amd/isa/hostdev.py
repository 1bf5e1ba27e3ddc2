"""`DEV=EMU+AMD` with machine code: `use_isa("EMU+AMD:HIP:gfx1201")` swaps the opened EMU device's UOp interpreter
for its AMD renderer + compiler + this ISA emulator, with buffers in host memory (their host addresses serve as GPU
addresses). For running tinycore's conformance kit against the machine code before the KFD runtime's mock driver
exists (`pytest --pyargs tinycore.testing --device=EMU+AMD:HIP:gfx1201 -p tinycore_amd.isa.pytest_kit`), and for bug
hunts; MOCKGPU=1 DEV=KFD+AMD is the device path."""
from __future__ import annotations
import numpy as np
from tinycore_amd.isa.dispatch import dispatch, DispatchStats
from tinycore_amd.isa.memory import MemoryFault

class HostMemory:
  """GPU memory = the host buffers of one launch (plus its kernarg block), each access bounds-checked."""
  def __init__(self):
    self.ranges: list[tuple[int, np.ndarray]] = []
  def add(self, mv) -> int:
    arr = np.frombuffer(mv, np.uint8)
    addr = arr.ctypes.data if len(arr) else 0x1000
    self.ranges.append((addr, arr))
    return addr
  def _locate(self, addrs: np.ndarray, size: int):
    a = np.asarray(addrs, np.uint64)
    where = np.full(len(a), -1)
    for k, (base, arr) in enumerate(self.ranges):
      inside = (a >= np.uint64(base)) & (a + np.uint64(size) <= np.uint64(base + len(arr)))
      where = np.where((where < 0) & inside, k, where)
    if (where < 0).any():
      raise MemoryFault(f"GPU memory fault: {size}-byte access at 0x{int(a[np.argmax(where < 0)]):x} is outside every buffer of the launch")
    return a, where
  def load(self, addrs: np.ndarray, size: int) -> np.ndarray:
    a, where = self._locate(addrs, size)
    out = np.empty((len(a), size), np.uint8)
    for k in np.unique(where):
      sel = np.nonzero(where == k)[0]
      base, arr = self.ranges[k]
      out[sel] = arr[(a[sel] - np.uint64(base)).astype(np.int64)[:, None] + np.arange(size)]
    return out
  def store(self, addrs: np.ndarray, data: np.ndarray) -> None:
    a, where = self._locate(addrs, data.shape[1])
    for k in np.unique(where):
      sel = np.nonzero(where == k)[0]
      base, arr = self.ranges[k]
      arr[(a[sel] - np.uint64(base)).astype(np.int64)[:, None] + np.arange(data.shape[1])] = data[sel]

class ISAProgram:
  """`prg(*bufs, global_size, local_size, vals)` on the emulator; kernargs packed from the code object's metadata.
  `totals` sums every dispatch of the process, `seconds` the time spent in the emulator, `emitted` the operations in
  every code object loaded (for coverage)."""
  totals = DispatchStats()
  seconds = 0.0
  emitted: set = set()
  def __init__(self, name: str, lib: bytes, arch: str):
    from tinycore_amd.codeobject import read
    self.name, self.lib, self.arch = name, lib, arch
    k = read(lib).kernels[name]
    from tinycore_amd.isa.measure import emitted_ops
    ISAProgram.emitted |= emitted_ops(lib, arch)
    self.args = [(a[".offset"], a[".size"]) for a in k.args if not a.get(".value_kind", "").startswith("hidden_")]
    self.kernarg_size = max(k.kernarg_size, 8)
  def __call__(self, *bufs, global_size=(1, 1, 1), local_size=(1, 1, 1), vals: tuple = (), wait=False, **kw):
    import time
    mem = HostMemory()
    addrs = [mem.add(b) for b in bufs]
    ka = bytearray(self.kernarg_size)
    for (off, size), v in zip(self.args, [*addrs, *vals]): ka[off:off + size] = (int(v) & ((1 << 8 * size) - 1)).to_bytes(size, "little")
    ka_addr = mem.add(memoryview(ka))
    gs, ls = (*(global_size or ()), 1, 1, 1)[:3], (*(local_size or ()), 1, 1, 1)[:3]
    st = time.perf_counter()
    s = dispatch(self.lib, self.name, self.arch, gs, ls, ka_addr, mem)
    t = ISAProgram.totals
    t.instructions += s.instructions; t.waves += s.waves; t.workgroups += s.workgroups; t.opcodes |= s.opcodes
    ISAProgram.seconds += time.perf_counter() - st
    if wait: return time.perf_counter() - st

def use_isa(device: str):
  """Make the opened EMU+AMD `device` (host-memory allocator) compile with its AMD renderer (the one `DEV=EMU+AMD:HIP:gfx1201`
  names) and run the code objects on the ISA emulator instead of interpreting the UOp program. Returns the device."""
  from tinycore.device import Device
  from tinycore.emulator.device import EmulatedRenderer
  dev = Device[device]
  if isinstance(dev.renderer, EmulatedRenderer): dev.renderer = dev.renderer.base
  if getattr(dev.renderer, "device", None) != "AMD": raise ValueError(f"{device} is not an EMU+AMD device")
  arch = dev.renderer.arch
  dev.runtime = lambda name, lib: ISAProgram(name, lib, arch)
  return dev
