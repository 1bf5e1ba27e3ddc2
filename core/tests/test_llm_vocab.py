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
