"""A read-only sequence of strings held as one UTF-8 blob and an offsets array: a big string table (a tokenizer's 50k-250k
pieces) without a Python object per item. As a list, each piece is a str of ~50 bytes of header plus a list slot, and
once freed those small objects leave the interpreter's memory pools fragmented: pools half-used by whatever was
allocated in between stay resident. The GGUF reader fills one straight from the file (nn/gguf.py)."""
from __future__ import annotations
from collections.abc import Iterator, Sequence
import numpy as np

_CHUNK = 4096

class PackedStrings(Sequence):
  """`blob[offsets[i]:offsets[i + 1]]` is item i's UTF-8 bytes (surrogatepass: a lone surrogate, which an HF
  tokenizer.json may hold, round-trips). `offsets` is non-decreasing, starts at 0 and ends at len(blob)."""
  def __init__(self, blob: bytes, offsets: np.ndarray):
    self._blob, self._off = blob, offsets

  @staticmethod
  def offsets_dtype(blob_len: int) -> type: return np.int32 if blob_len < 2**31 else np.int64

  @classmethod
  def of(cls, items: Sequence[str]) -> PackedStrings:
    if isinstance(items, PackedStrings): return cls(items._blob, items._off)   # shares the blob: no copy
    enc = [s.encode("utf-8", "surrogatepass") for s in items]
    blob = b"".join(enc)
    off = np.zeros(len(enc) + 1, cls.offsets_dtype(len(blob)))
    np.cumsum([len(e) for e in enc], out=off[1:])
    return cls(blob, off)

  def __len__(self) -> int: return len(self._off) - 1
  def __getitem__(self, i):
    if isinstance(i, slice): return [self[j] for j in range(*i.indices(len(self)))]
    n = len(self)
    if not -n <= i < n: raise IndexError(f"index {i} is out of range for {n} strings")
    i %= n
    return self._blob[int(self._off[i]):int(self._off[i + 1])].decode("utf-8", "surrogatepass")
  def __iter__(self) -> Iterator[str]:
    blob, n = self._blob, len(self)
    for c in range(0, n, _CHUNK):   # offsets as ints a chunk at a time: tolist() of them all would be 50k+ int objects at once
      off = self._off[c:c + _CHUNK + 1].tolist()
      for a, b in zip(off, off[1:]): yield blob[a:b].decode("utf-8", "surrogatepass")
  def raw(self, i: int) -> bytes:
    """Item i's UTF-8 bytes (no decode)."""
    return self._blob[int(self._off[i]):int(self._off[i + 1])]
  def __eq__(self, other) -> bool:
    if isinstance(other, PackedStrings): return self._blob == other._blob and np.array_equal(self._off, other._off)
    return isinstance(other, (list, tuple)) and len(other) == len(self) and all(a == b for a, b in zip(self, other))
  __hash__ = None   # type: ignore[assignment]   # equal to a list, which has no hash either
  def __repr__(self) -> str: return f"PackedStrings({len(self)} strings, {len(self._blob)} bytes)"
