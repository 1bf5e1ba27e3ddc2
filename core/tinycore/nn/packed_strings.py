"""A read-only sequence of strings held as one UTF-8 blob and an offsets array: a big string table (a tokenizer's 50k-250k
pieces) without a Python object per item. As a list, each piece is a str of ~50 bytes of header plus a list slot, and
once freed those small objects leave the interpreter's memory pools fragmented: pools half-used by whatever was
allocated in between stay resident. The GGUF reader fills one straight from the file (nn/gguf.py)."""
from __future__ import annotations
from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate, islice

class PackedStrings(Sequence):
  """`blob[offsets[i]:offsets[i + 1]]` is item i's UTF-8 bytes (surrogatepass: a lone surrogate, which an HF
  tokenizer.json may hold, round-trips). `offsets` (an array.array of ints, 4 bytes each where the blob allows) is
  non-decreasing, starts at 0 and ends at len(blob)."""
  def __init__(self, blob: bytes, offsets: array):
    self._blob, self._off = blob, offsets

  @classmethod
  def of(cls, items: Sequence[str]) -> PackedStrings:
    if isinstance(items, PackedStrings): return cls(items._blob, items._off)   # shares the blob: no copy
    enc = [s.encode("utf-8", "surrogatepass") for s in items]
    blob = b"".join(enc)
    return cls(blob, array("i" if len(blob) < 2**31 else "q", accumulate(map(len, enc), initial=0)))

  def __len__(self) -> int: return len(self._off) - 1
  def __getitem__(self, i):
    if isinstance(i, slice): return [self[j] for j in range(*i.indices(len(self)))]
    n = len(self)
    if not -n <= i < n: raise IndexError(f"index {i} is out of range for {n} strings")
    i %= n
    return self._blob[self._off[i]:self._off[i + 1]].decode("utf-8", "surrogatepass")
  def __iter__(self) -> Iterator[str]:
    blob = self._blob
    for a, b in zip(self._off, islice(self._off, 1, None)): yield blob[a:b].decode("utf-8", "surrogatepass")
  def raw(self, i: int) -> bytes:
    """Item i's UTF-8 bytes (no decode)."""
    return self._blob[self._off[i]:self._off[i + 1]]
  def __eq__(self, other) -> bool:
    if isinstance(other, PackedStrings): return self._blob == other._blob and self._off == other._off
    return isinstance(other, (list, tuple)) and len(other) == len(self) and all(a == b for a, b in zip(self, other))
  __hash__ = None   # equal to a list, which has no hash either
  def __repr__(self) -> str: return f"PackedStrings({len(self)} strings, {len(self._blob)} bytes)"
