"""A tokenizer's vocabulary held compactly: every piece's UTF-8 bytes in one blob with numpy offsets, and the piece ->
id lookup as a sorted array of string hashes. As a list of str plus a {str: id} dict, a 49k-piece vocabulary costs
~6.5 MiB of Python objects (a str is ~50 bytes of header, a dict slot and an int object more per piece); so, ~1 MiB."""
from __future__ import annotations
from collections.abc import Iterator, Sequence
import numpy as np

class Vocab(Sequence):
  """Pieces by id: `vocab[i]` is piece i's text, `vocab.id_of(text)` its id (the last id where a piece repeats, as a
  dict built over the list would have it), `vocab.ids` a read-only mapping view for `in` / `[]` / `get`."""
  def __init__(self, pieces: Sequence[str]):
    # surrogatepass: a piece from an HF tokenizer.json may hold a lone surrogate; it comes back as it was
    enc = [p.encode("utf-8", "surrogatepass") for p in pieces]
    self._blob = b"".join(enc)
    self._off = np.zeros(len(enc) + 1, np.int32 if len(self._blob) < 2**31 else np.int64)
    np.cumsum([len(e) for e in enc], out=self._off[1:])
    # str hashes are salted per process, and this table lives only in this process: they are stable for its lifetime
    hashes = np.fromiter((hash(p) for p in pieces), np.int64, len(enc))
    self._order = np.argsort(hashes, kind="stable").astype(np.int32)   # equal hashes keep id order
    self._keys = hashes[self._order]
    self.ids = _Ids(self)

  def __len__(self) -> int: return len(self._off) - 1
  def __getitem__(self, i):
    if isinstance(i, slice): return [self[j] for j in range(*i.indices(len(self)))]
    n = len(self)
    if not -n <= i < n: raise IndexError(f"token id {i} is not in the vocabulary of {n}")
    i %= n
    return self._blob[int(self._off[i]):int(self._off[i + 1])].decode("utf-8", "surrogatepass")
  def __iter__(self) -> Iterator[str]:
    off, blob = self._off.tolist(), self._blob
    for a, b in zip(off, off[1:]): yield blob[a:b].decode("utf-8", "surrogatepass")

  def id_of(self, text: str) -> int | None:
    h = hash(text)
    lo = int(np.searchsorted(self._keys, h))
    hit, raw = None, None
    while lo < len(self._keys) and self._keys[lo] == h:   # a hash collision is possible: compare the bytes
      i = int(self._order[lo])
      if raw is None: raw = text.encode("utf-8", "surrogatepass")
      if self._blob[int(self._off[i]):int(self._off[i + 1])] == raw: hit = i
      lo += 1
    return hit

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
