"""A tokenizer's vocabulary held compactly: every piece's UTF-8 bytes in one blob with numpy offsets (nn/packed_strings.py),
and the piece -> id lookup as a sorted array of string hashes. As a list of str plus a {str: id} dict, a 49k-piece
vocabulary costs ~6.5 MiB of Python objects (a str is ~50 bytes of header, a dict slot and an int object more per piece);
so, ~1 MiB. Built from a GGUF's packed string table it shares that blob: no piece is ever a Python object for long."""
from __future__ import annotations
import bisect
from collections.abc import Sequence
import numpy as np
from tinycore.nn.packed_strings import PackedStrings

def _hash32(text: str) -> int:
  """hash(text) folded into int32's range (its low 32 bits, as signed)."""
  return ((hash(text) + 2**31) & 0xFFFFFFFF) - 2**31

class Vocab(PackedStrings):
  """Pieces by id: `vocab[i]` is piece i's text, `vocab.id_of(text)` its id (the last id where a piece repeats, as a
  dict built over the list would have it), `vocab.ids` a read-only mapping view for `in` / `[]` / `get`."""
  def __init__(self, pieces: Sequence[str]):
    packed = PackedStrings.of(pieces)
    super().__init__(packed._blob, packed._off)
    self._keys: np.ndarray | None = None   # the hash index, built on the first lookup by text (encoding)
    self._order: np.ndarray | None = None
    self.ids = _Ids(self)

  def _index(self) -> tuple[np.ndarray, np.ndarray]:
    """(sorted hash keys, ids in that order). Built when text is first looked up, not at load: a process that only
    decodes (a benchmark, a server fed token ids) never holds it (~0.4 MiB for 49k pieces), and loading skips hashing
    every piece. str hashes are salted per process, and this table lives only in this process: they are stable for
    its lifetime. Their low 32 bits: half the bytes, and the rare extra collision costs a comparison of bytes."""
    if self._keys is None or self._order is None:
      hashes = np.fromiter((_hash32(p) for p in self), np.int32, len(self))
      self._order = np.argsort(hashes, kind="stable").astype(np.int32)   # equal hashes keep id order
      self._keys = hashes[self._order]
    return self._keys, self._order

  def __getitem__(self, i):
    if isinstance(i, int) and not -len(self) <= i < len(self): raise IndexError(f"token id {i} is not in the vocabulary of {len(self)}")
    return super().__getitem__(i)

  def all_ids_of(self, text: str) -> list[int]:
    """Every id whose piece is `text`, ascending."""
    keys, order = self._index()
    h = _hash32(text)
    lo, out, raw = int(np.searchsorted(keys, h)), [], None
    while lo < len(keys) and keys[lo] == h:   # a hash collision is possible: compare the bytes
      if raw is None: raw = text.encode("utf-8", "surrogatepass")   # only on a hit: most lookups (merge candidates) miss
      if self.raw(i := int(order[lo])) == raw: out.append(i)
      lo += 1
    return out

  def scan_ids_of(self, text: str) -> list[int]:
    """all_ids_of(text) by a search of the blob, without the index: for a few lookups while loading."""
    raw, off, out = text.encode("utf-8", "surrogatepass"), self._off, []
    if not raw: return [i for i in range(len(self)) if off[i] == off[i + 1]]
    pos = self._blob.find(raw)
    while pos >= 0:
      j = bisect.bisect_left(off, pos)
      while j < len(self) and off[j] == pos:   # empty pieces share their offset with the next one
        if off[j + 1] == pos + len(raw): out.append(j)
        j += 1
      pos = self._blob.find(raw, pos + 1)
    return out

  def id_of(self, text: str) -> int | None:
    return ids[-1] if (ids := self.all_ids_of(text)) else None

class _Ids:
  """piece text -> id, dict-like (read only)."""
  def __init__(self, vocab: Vocab): self._v = vocab
  def get(self, text: str, default=None):
    i = self._v.id_of(text) if isinstance(text, str) else None
    return default if i is None else i
  def __contains__(self, text) -> bool: return self.get(text) is not None
  def __getitem__(self, text: str) -> int:
    if (i := self.get(text)) is None: raise KeyError(text)
    return i
  def __len__(self) -> int: return len(self._v)
