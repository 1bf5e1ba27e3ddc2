"""The mock GPU's virtual memory: the allocations KFD made, by GPU address. GTT is host memory at its own address
(the runtime reads and writes it there too); VRAM is a host array the CPU cannot reach, as on a GPU without a large BAR.

It implements the emulator's GlobalMemory: gathers and scatters of n same-sized accesses, vectorized, and a fault
naming the address for any access outside a live allocation."""
from __future__ import annotations
import bisect, ctypes
import numpy as np

class GPUMemoryFault(RuntimeError):
  """A GPU access to an address no allocation covers (the page fault a real GPU would report)."""

class Region:
  def __init__(self, va: int, size: int, vram: bool, handle: int):
    self.va, self.size, self.vram, self.handle = va, size, vram, handle
    self.mapped = False   # MAP_MEMORY_TO_GPU done
    self.data = np.zeros(size, np.uint8) if vram else np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(va))

class MockGPUMemory:
  def __init__(self):
    self.regions: dict[int, Region] = {}
    self._bases: list[int] = []
    self.loads = self.stores = 0
  def add(self, r: Region) -> None:
    i = bisect.bisect_right(self._bases, r.va)
    prev = self.regions[self._bases[i - 1]] if i else None
    if (prev and prev.va + prev.size > r.va) or (i < len(self._bases) and r.va + r.size > self._bases[i]):
      raise ValueError(f"allocation 0x{r.va:x}+{r.size} overlaps another")
    self.regions[r.va] = r
    self._bases.insert(i, r.va)
  def remove(self, va: int) -> Region:
    r = self.regions.pop(va)
    self._bases.remove(va)
    return r
  def region_of(self, addr: int, size: int = 1) -> Region:
    i = bisect.bisect_right(self._bases, addr) - 1
    if i < 0 or not (r := self.regions[self._bases[i]]).mapped or addr + size > r.va + r.size:
      raise GPUMemoryFault(f"GPU access to unmapped address 0x{addr:x} ({size} bytes)")
    return r

  def _split(self, addrs: np.ndarray, size: int):
    """[(region, row indices, offsets into the region)] for every access, or a fault naming the first bad one."""
    addrs = np.asarray(addrs, dtype=np.uint64).reshape(-1)
    if addrs.size == 0: return []
    bases = np.asarray(self._bases, dtype=np.uint64)
    idx = np.searchsorted(bases, addrs, side="right").astype(np.int64) - 1
    out = []
    for i in np.unique(idx):
      rows = np.nonzero(idx == i)[0]
      if i < 0: raise GPUMemoryFault(f"GPU access to unmapped address 0x{int(addrs[rows[0]]):x} ({size} bytes)")
      r = self.regions[int(bases[i])]
      off = (addrs[rows] - np.uint64(r.va)).astype(np.int64)
      if not r.mapped or int(off.max()) + size > r.size:
        bad = int(addrs[rows[np.argmax(off + size > r.size)]]) if r.mapped else int(addrs[rows[0]])
        raise GPUMemoryFault(f"GPU access to unmapped address 0x{bad:x} ({size} bytes; allocation 0x{r.va:x}+{r.size})")
      out.append((r, rows, off))
    return out
  def load(self, addrs: np.ndarray, size: int) -> np.ndarray:
    parts = self._split(addrs, size)
    out = np.empty((sum(len(rows) for _, rows, _ in parts), size), np.uint8)
    span = np.arange(size, dtype=np.int64)
    for r, rows, off in parts: out[rows] = r.data[off[:, None] + span]
    self.loads += len(out)
    return out
  def store(self, addrs: np.ndarray, data: np.ndarray) -> None:
    data = np.asarray(data, dtype=np.uint8)
    data = data.reshape(len(data), -1) if data.ndim != 2 else data
    span = np.arange(data.shape[1], dtype=np.int64)
    for r, rows, off in self._split(addrs, data.shape[1]): r.data[off[:, None] + span] = data[rows]
    self.stores += len(data)
  def read(self, addr: int, n: int) -> bytes:
    r = self.region_of(addr, n)
    return r.data[addr - r.va:addr - r.va + n].tobytes()
  def write(self, addr: int, b: bytes) -> None:
    r = self.region_of(addr, len(b))
    r.data[addr - r.va:addr - r.va + len(b)] = np.frombuffer(b, np.uint8)
