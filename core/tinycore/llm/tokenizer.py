"""Tokenizers from GGUF metadata: `llama` (SentencePiece: pieces with scores, '▁' for spaces, <0xXX> byte fallback) and
`gpt2` (byte-level BPE with ranked merges, as used by llama 3 and qwen). Special/control tokens are matched verbatim."""
from __future__ import annotations
import re
from functools import lru_cache
from typing import Any

@lru_cache(None)
def _byte_chars() -> dict[int, str]:
  """GPT-2's reversible byte -> printable unicode char map."""
  keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
  m, n = {b: chr(b) for b in keep}, 0
  for b in range(256):
    if b not in m: m[b], n = chr(256 + n), n + 1
  return m

# gpt2/llama3 pre-tokenizer, approximated with `re` (no \p{L}): contractions, words with an optional leading space, 1-3 digits, punctuation runs, spaces
_PRE = re.compile(r"""'(?i:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+|_+""")

class Tokenizer:
  def __init__(self, kv: dict[str, Any]):
    if "tokenizer.ggml.tokens" not in kv: raise ValueError("GGUF file has no tokenizer (tokenizer.ggml.tokens)")
    self.model = kv.get("tokenizer.ggml.model", "llama")
    self.tokens: list[str] = kv["tokenizer.ggml.tokens"]
    self.ids = {t: i for i, t in enumerate(self.tokens)}
    self.types: list[int] = kv.get("tokenizer.ggml.token_type", [1] * len(self.tokens))
    self.scores: list[float] = kv.get("tokenizer.ggml.scores", [0.0] * len(self.tokens))
    self.bos = kv.get("tokenizer.ggml.bos_token_id")
    self.eos = kv.get("tokenizer.ggml.eos_token_id")
    self.add_bos = kv.get("tokenizer.ggml.add_bos_token", self.model == "llama") and self.bos is not None
    self.add_space_prefix = kv.get("tokenizer.ggml.add_space_prefix", self.model == "llama")
    self.ranks = {tuple(m.split(" ", 1)): r for r, m in enumerate(kv.get("tokenizer.ggml.merges", []))}
    # control (3) and user-defined (4) tokens are matched as whole strings before normal tokenization
    sp = sorted((t for t, ty in zip(self.tokens, self.types) if ty in (3, 4) and t), key=len, reverse=True)
    self.special_re = re.compile("(" + "|".join(map(re.escape, sp)) + ")") if sp else None
    self.stop = {i for i, t in enumerate(self.tokens) if t in ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")}
    if self.eos is not None: self.stop.add(self.eos)

  def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
    out = [self.bos] if (self.add_bos if add_bos is None else add_bos) else []
    parts = self.special_re.split(text) if self.special_re else [text]
    first = True
    for p in parts:
      if not p: continue
      if p in self.ids and self.types[self.ids[p]] in (3, 4): out.append(self.ids[p])
      else: out += self._spm(p, first) if self.model == "llama" else self._bpe(p)
      first = False
    return out

  def _spm(self, text: str, first: bool) -> list[int]:
    s = ((" " if first and self.add_space_prefix else "") + text).replace(" ", "▁")
    syms = list(s)
    while True:   # merge the adjacent pair whose joined piece scores highest (SentencePiece's BPE-with-scores)
      best, bi = None, -1
      for i in range(len(syms) - 1):
        j = self.ids.get(syms[i] + syms[i + 1])
        if j is not None and (best is None or self.scores[j] > best): best, bi = self.scores[j], i
      if bi < 0: break
      syms[bi:bi + 2] = [syms[bi] + syms[bi + 1]]
    out = []
    for sy in syms:
      if sy in self.ids: out.append(self.ids[sy])
      else: out += [self.ids.get(f"<0x{b:02X}>", self.ids.get("<unk>", 0)) for b in sy.encode()]   # byte fallback
    return out

  def _bpe(self, text: str) -> list[int]:
    bc, out = _byte_chars(), []
    for word in _PRE.findall(text):
      syms = [bc[b] for b in word.encode()]
      while len(syms) > 1:   # apply the lowest-ranked merge present
        r, bi = min((self.ranks.get((syms[i], syms[i + 1]), 1 << 60), i) for i in range(len(syms) - 1))
        if r == 1 << 60: break
        syms[bi:bi + 2] = [syms[bi] + syms[bi + 1]]
      for sy in syms:
        if sy in self.ids: out.append(self.ids[sy])
        else: out += [self.ids[c] for c in sy if c in self.ids]
    return out

  def decode(self, ids: list[int], skip_special: bool = True) -> str:
    return self.decode_bytes(ids, skip_special).decode("utf-8", errors="replace")

  def decode_bytes(self, ids: list[int], skip_special: bool = True, strip_prefix: bool = True) -> bytes:
    buf = bytearray()
    inv = {c: b for b, c in _byte_chars().items()}
    first = True
    for i in ids:
      t, ty = self.tokens[i], self.types[i]
      if ty in (2, 3) and skip_special: continue
      if self.model == "llama":
        if ty == 6 and re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", t): buf.append(int(t[3:5], 16)); continue
        s = t.replace("▁", " ")
        if first and strip_prefix and self.add_space_prefix and s.startswith(" "): s = s[1:]
        buf += s.encode()
        first = False
      else: buf += bytes(inv[c] for c in t if c in inv) if ty != 3 else t.encode()
    return bytes(buf)
