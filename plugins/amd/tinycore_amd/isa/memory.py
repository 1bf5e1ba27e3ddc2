"""GPU virtual memory as the emulator sees it (the GlobalMemory protocol the mock driver implements) and ArenaMemory,
a simple implementation for tests: buffers allocated at increasing addresses, every access bounds-checked."""
from __future__ import annotations
import bisect
from typing import Protocol
import numpy as np

class MemoryFault(RuntimeError):
  pass

class GlobalMemory(Protocol):
  def load(self, addrs: np.ndarray, size: int) -> np.ndarray: ...        # uint64[n] -> uint8[n, size]; raises on unmapped
  def store(self, addrs: np.ndarray, data: np.ndarray) -> None: ...      # data uint8[n, size]

class ArenaMemory:
  """Buffers at 4 KiB-aligned addresses from `base`; an access must lie wholly inside one buffer."""
  def __init__(self, base: int = 0x10_0000_0000):
    self.next, self.starts, self.bufs = base, [], []
  def alloc(self, size: int) -> int:
    addr = self.next
    self.starts.append(addr)
    self.bufs.append(np.zeros(max(size, 1), np.uint8))
    self.next = (addr + size + 0xFFF + 0x1000) & ~0xFFF   # a guard page between buffers
    return addr
  def put(self, data) -> int:
    """Allocate a buffer holding `data` (anything numpy can view as bytes); returns its address."""
    b = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    addr = self.alloc(len(b))
    self.bufs[-1][:len(b)] = b
    return addr
  def get(self, addr: int, dtype, count: int) -> np.ndarray:
    k = self._find(np.array([addr], np.uint64), np.dtype(dtype).itemsize * count)[0]
    off = addr - self.starts[k]
    return self.bufs[k][off:off + np.dtype(dtype).itemsize * count].view(dtype).copy()
  def _find(self, addrs: np.ndarray, size: int) -> np.ndarray:
    """Index of the buffer each access falls in; raises if one is not wholly inside a buffer."""
    a = np.asarray(addrs, np.uint64)
    k = np.searchsorted(np.array(self.starts, np.uint64), a, side="right") - 1
    ends = np.array([s + len(b) for s, b in zip(self.starts, self.bufs)], np.uint64)
    bad = (k < 0) | (a + np.uint64(size) > ends[np.maximum(k, 0)])
    if bad.any():
      ad = int(a[np.argmax(bad)])
      raise MemoryFault(f"GPU memory fault: {size}-byte access at 0x{ad:x} is outside every allocated buffer")
    return k
  def _index(self, addrs: np.ndarray, size: int):
    """(buffer, [n, size] byte offsets) per group of accesses into the same buffer."""
    a = np.asarray(addrs, np.uint64)
    if len(a) and self.starts:   # the usual case: every lane in one buffer, found by bisecting its lowest address
      lo, hi = int(a.min()), int(a.max())
      k = bisect.bisect_right(self.starts, lo) - 1
      if k >= 0 and hi + size <= self.starts[k] + len(self.bufs[k]):
        yield slice(None), self.bufs[k], (a - np.uint64(self.starts[k])).astype(np.int64)[:, None] + np.arange(size)
        return
    k = self._find(a, size)
    for kk in np.unique(k):
      sel = np.nonzero(k == kk)[0]
      yield sel, self.bufs[kk], (a[sel] - np.uint64(self.starts[kk])).astype(np.int64)[:, None] + np.arange(size)
  def load(self, addrs: np.ndarray, size: int) -> np.ndarray:
    out = np.empty((len(addrs), size), np.uint8)
    for sel, buf, idx in self._index(addrs, size): out[sel] = buf[idx]
    return out
  def store(self, addrs: np.ndarray, data: np.ndarray) -> None:
    for sel, buf, idx in self._index(addrs, data.shape[1]): buf[idx] = data[sel]

DictMemory = ArenaMemory   # the name the interface brief uses
