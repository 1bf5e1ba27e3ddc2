"""The compact vocabulary (llm/vocab.py) answers exactly as the list of pieces and the {piece: id} dict it replaces."""
import random
import pytest
from tinycore.llm.vocab import Vocab

def _pieces(n: int, seed: int = 0) -> list[str]:
  r = random.Random(seed)
  alphabet = "ab▁Ġ\n\t é中😀<>|_" + "\ud800"   # multi-byte UTF-8, an emoji, a lone surrogate (tokenizer.json may hold one)
  out = [r.choice(["", "<0x0A>", "<|im_end|>"]) if i < 3 else "".join(r.choice(alphabet) for _ in range(r.randint(1, 6))) for i in range(n)]
  return out + out[5:40]   # repeated pieces: the dict keeps the last id

def test_same_answers_as_list_and_dict():
  pieces = _pieces(3000)
  v, ref = Vocab(pieces), {p: i for i, p in enumerate(pieces)}
  assert len(v) == len(pieces) and list(v) == pieces and [v[i] for i in range(len(v))] == pieces
  assert v[-1] == pieces[-1] and v[2:7] == pieces[2:7]
  for p, i in ref.items(): assert v.id_of(p) == i and v.ids[p] == i and p in v.ids
  for missing in ("zzz", "a" * 40, "▁▁▁▁▁▁▁▁", "\ud801"):
    if missing not in ref: assert v.ids.get(missing) is None and missing not in v.ids and v.ids.get(missing, -7) == -7
  with pytest.raises(IndexError): v[len(v)]
  with pytest.raises(KeyError): v.ids["not a piece at all"]
  assert v.ids.get(5) is None   # not a string: not a piece

def test_empty():
  v = Vocab([])
  assert len(v) == 0 and list(v) == [] and v.id_of("a") is None

def test_scan_matches_index():
  """scan_ids_of (a search of the blob, used while loading) finds exactly the ids the hash index does: repeated pieces,
  empty pieces, pieces that are substrings of or overlap their neighbours."""
  pieces = _pieces(2000, seed=1) + ["ab", "b", "abab", "", "ab", "a", "ba"]
  v = Vocab(pieces)
  for text in set(pieces) | {"aba", "bab", "zz"}:
    want = [i for i, p in enumerate(pieces) if p == text]
    assert v.scan_ids_of(text) == want, text
    assert v.all_ids_of(text) == want, text

def test_index_built_on_first_lookup():
  v = Vocab(_pieces(500))
  assert v._keys is None   # loading (and decoding ids) doesn't build it
  _ = v[3], list(v)[:3]
  assert v._keys is None
  assert v.id_of(v[7]) is not None and v._keys is not None
