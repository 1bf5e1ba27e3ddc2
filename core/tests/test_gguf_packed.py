"""The GGUF reader's packed path (gguf_tensors(packed=...), what the LLM loader uses for the vocabulary): the same
values as the list path, and the same clear errors for truncated, oversized or non-UTF-8 arrays, raised before any
allocation the file can't back."""
import struct
from array import array
import pytest
from tinycore.nn.file_errors import CorruptFileError
from tinycore.nn.gguf import gguf_tensors
from tinycore.nn.packed_strings import PackedStrings

KEY = "tokenizer.ggml.tokens"

def _kv(key: str, body: bytes) -> bytes:
  k = key.encode()
  return struct.pack("<Q", len(k)) + k + body

def _gguf(*kvs: bytes) -> bytes: return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)

def _strings(items: list[bytes], declared: int | None = None) -> bytes:
  return struct.pack("<IIQ", 9, 8, len(items) if declared is None else declared) + b"".join(struct.pack("<Q", len(s)) + s for s in items)

def _read(tmp_path, data: bytes, packed=(KEY,)):
  p = tmp_path / "t.gguf"
  p.write_bytes(data)
  return gguf_tensors(p, packed=packed)[0]

def test_same_values_as_lists(tmp_path):
  toks = ["<s>", "", "héllo", "\u2581world", "🙂", "a" * 300, "", "中文"]
  scores = [0.5, -1.25, float("inf"), 3.0]
  data = _gguf(_kv(KEY, _strings([t.encode() for t in toks])),
               _kv("tokenizer.ggml.scores", struct.pack("<IIQ", 9, 6, 4) + struct.pack("<4f", *scores)),
               _kv("tokenizer.ggml.token_type", struct.pack("<IIQ", 9, 5, 3) + struct.pack("<3i", 1, -3, 70000)),
               _kv("tokenizer.ggml.merges", _strings([b"a b"])))
  keys = (KEY, "tokenizer.ggml.scores", "tokenizer.ggml.token_type")
  packed, plain = _read(tmp_path, data, keys), _read(tmp_path, data, ())
  assert isinstance(packed[KEY], PackedStrings) and packed[KEY] == toks == plain[KEY] and list(packed[KEY]) == toks
  assert [packed[KEY][i] for i in range(-len(toks), len(toks))] == toks + toks
  assert isinstance(packed["tokenizer.ggml.scores"], array) and list(packed["tokenizer.ggml.scores"]) == scores == plain["tokenizer.ggml.scores"]
  assert list(packed["tokenizer.ggml.token_type"]) == [1, -3, 70000] == plain["tokenizer.ggml.token_type"]
  assert packed["tokenizer.ggml.merges"] == ["a b"]   # not asked for: a list as before

def test_empty_array(tmp_path):
  assert list(_read(tmp_path, _gguf(_kv(KEY, _strings([]))))[KEY]) == []

@pytest.mark.parametrize("items,match", [
  ([b"ok", b"\xff\xfe"], r"item 1 is not UTF-8"),
  ([b"ok", b"\x80abc"], r"item 1 .*starts inside a character"),   # a lone continuation byte
  ([b"caf\xc3", b"\xa9"], r"item 1 .*starts inside a character"),   # one character split across two items
  ([b"ok", b"caf\xc3"], r"item 1 is not UTF-8"),                    # the last item ends inside a character
  ([b"\xed\xa0\x80"], r"item 0 is not UTF-8"),                      # an encoded surrogate
])
def test_not_utf8(tmp_path, items, match):
  with pytest.raises(CorruptFileError, match=match): _read(tmp_path, _gguf(_kv(KEY, _strings(items))))

def test_truncated_and_oversized(tmp_path):
  data = _gguf(_kv(KEY, _strings([b"abc", b"defgh"])))
  with pytest.raises(CorruptFileError, match=r"length 5 .*can't fit"): _read(tmp_path, data[:-2])
  with pytest.raises(CorruptFileError, match=r"truncated"): _read(tmp_path, data[:-9])
  # a count the file can't hold fails on the count, before any per-item work or allocation
  with pytest.raises(CorruptFileError, match=r"length 1152921504606846976 .*can't fit"):
    _read(tmp_path, _gguf(_kv(KEY, _strings([b"a"], declared=1 << 60))))
  with pytest.raises(CorruptFileError, match=r"can't fit"):   # a huge item length
    _read(tmp_path, _gguf(_kv(KEY, struct.pack("<IIQ", 9, 8, 1) + struct.pack("<Q", 1 << 62) + b"x" * 16)))
  # a numeric array whose count runs past the end
  with pytest.raises(CorruptFileError, match=r"can't fit"):
    _read(tmp_path, _gguf(_kv("tokenizer.ggml.scores", struct.pack("<IIQ", 9, 6, 1000) + b"\0" * 16)), ("tokenizer.ggml.scores",))
