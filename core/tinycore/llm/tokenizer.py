"""Tokenizers from GGUF metadata: `llama` (SentencePiece: pieces with scores, '▁' for spaces, <0xXX> byte fallback) and
`gpt2` (byte-level BPE with ranked merges, as used by llama 3 and qwen, cut into words first by the pre-tokenizer that
`tokenizer.ggml.pre` names). Special/control tokens are matched verbatim."""
from __future__ import annotations
import codecs, heapq, math, re
from array import array
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Callable
from tinycore.llm.pretokenize import PreTokenizer
from tinycore.llm.vocab import Vocab
from tinycore.nn.packed_strings import PackedStrings

# end-of-turn pieces of the chat formats: generation stops at any of them (and at the eos token)
STOP_PIECES = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")

@lru_cache(None)
def _byte_chars() -> dict[int, str]:
  """GPT-2's reversible byte -> printable unicode char map."""
  keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
  m, n = {b: chr(b) for b in keep}, 0
  for b in range(256):
    if b not in m: m[b], n = chr(256 + n), n + 1
  return m

@lru_cache(None)
def _byte_values() -> dict[str, int]: return {c: b for b, c in _byte_chars().items()}

def merge_pairs(syms: list[str], priority: Callable[[str, str], Any]) -> list[str]:
  """Join adjacent symbols, always the pair with the lowest `priority(left, right)` (None: never joined) and the leftmost
  of equals, until no pair is left to join. That is the textbook "rescan every pair after each merge" loop, which is
  quadratic; here the candidate pairs sit in a heap keyed by (priority, position) over a linked list of symbols, so it
  is O(n log n). A merge only changes its two neighbouring pairs, so entries it made stale are skipped when popped:
  a symbol's text only ever grows, so an entry is current iff both symbols still hold the text it was pushed with."""
  n = len(syms)
  if n < 2: return syms
  nxt, prv = list(range(1, n + 1)), list(range(-1, n - 1))
  def entry(i: int):   # the heap entry of the pair starting at symbol i, or None
    if i >= 0 and (j := nxt[i]) < n and (p := priority(syms[i], syms[j])) is not None: return (p, i, syms[i], syms[j])
    return None
  heap = [e for i in range(n - 1) if (e := entry(i)) is not None]
  heapq.heapify(heap)
  while heap:
    _, i, a, b = heapq.heappop(heap)
    j = nxt[i]
    if syms[i] != a or j >= n or syms[j] != b: continue   # stale: one of the two symbols has merged since
    syms[i], syms[j] = a + b, None
    nxt[i] = nxt[j]
    if nxt[i] < n: prv[nxt[i]] = i
    for e in (entry(prv[i]), entry(i)):
      if e is not None: heapq.heappush(heap, e)
  return [sy for sy in syms if sy is not None]

def _longest_of(words: list[str]) -> re.Pattern:
  """A regex (one capturing group) finding any of `words`, the longest where several start at the same place. Built
  as a trie of nested groups, so each position costs a character test per level rather than a try of every word: with
  thousands of special tokens the plain alternation made splitting a prompt cost O(len * words)."""
  trie: dict = {}
  for w in words:
    node = trie
    for ch in w: node = node.setdefault(ch, {})
    node[""] = {}   # a word ends here
  def pattern(node: dict) -> str:
    alts = []
    for ch, child in node.items():
      if ch == "": continue
      run = ch
      while len(child) == 1 and "" not in child: (c, child), = child.items(); run += c   # a chain without branches: one literal
      alts.append(re.escape(run) + pattern(child))
    if not alts: return ""
    body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
    return f"(?:{body})?" if "" in node else body   # greedy: the longer word is tried first
  try: return re.compile("(" + pattern(trie) + ")")
  except (RecursionError, re.error):   # a vocabulary built to nest too deep: the plain alternation is slower, not wrong
    return re.compile("(" + "|".join(map(re.escape, sorted(words, key=len, reverse=True))) + ")")

def _numbers(xs: list) -> array:
  """A list of ints as an array of int8 or int64 (not a list slot plus an int object each); one out of that range, or a
  float (hostile metadata), as float64, which compares equal to the same small ints."""
  for code in "bq":   # token types are 0..6: one byte each where they fit
    try: return array(code, xs)
    except (TypeError, OverflowError): pass
  return array("d", xs)

class Tokenizer:
  def __init__(self, kv: dict[str, Any]):
    if "tokenizer.ggml.tokens" not in kv: raise ValueError("GGUF file has no tokenizer (tokenizer.ggml.tokens)")
    self.model = kv.get("tokenizer.ggml.model", "llama")
    toks = kv["tokenizer.ggml.tokens"]
    # a PackedStrings (the GGUF reader's) holds UTF-8 text by construction
    if not isinstance(toks, PackedStrings) and (not isinstance(toks, list) or not all(isinstance(t, str) for t in toks)):
      raise ValueError("tokenizer.ggml.tokens must be a list of strings")
    # compact tables (llm/vocab.py, arrays): as Python lists and a dict they were ~9 MiB of objects for a 49k vocabulary;
    # a packed table from the reader becomes the Vocab without a copy
    self.tokens: Vocab = toks if isinstance(toks, Vocab) else Vocab(toks)
    n = len(self.tokens)
    self.ids = self.tokens.ids
    types = kv.get("tokenizer.ggml.token_type")
    compact = isinstance(types, array) and types.typecode in "bqd"   # already _numbers' (a Tokenizer's own table)
    self.types: Sequence[int] = types if compact else _numbers([1] * n if types is None else types)
    # a NaN score would break the ordering of merges (NaN compares false both ways): it ranks last instead
    scores = kv.get("tokenizer.ggml.scores", [0.0] * n)
    # float32 as the file stores them (half the bytes); numbers from elsewhere (a list, tokenizer.json) keep float64
    code = "f" if isinstance(scores, array) and scores.typecode == "f" else "d"
    self.scores: Sequence[float] = array(code, (-math.inf if math.isnan(x) else x for x in map(float, scores)))
    if len(self.types) != n or len(self.scores) != n:
      raise ValueError(f"tokenizer has {n} tokens but {len(self.types)} types and {len(self.scores)} scores")
    self.bos = kv.get("tokenizer.ggml.bos_token_id")
    self.eos = kv.get("tokenizer.ggml.eos_token_id")
    for k, v in (("bos", self.bos), ("eos", self.eos)):
      if v is not None and not (isinstance(v, int) and 0 <= v < n):
        raise ValueError(f"tokenizer.ggml.{k}_token_id {v!r} is not a token id (vocab of {n})")
    self._bpe_word = lru_cache(maxsize=1 << 16)(self._bpe_word_uncached)   # per instance: the result depends on the vocab
    self.add_bos = kv.get("tokenizer.ggml.add_bos_token", self.model == "llama") and self.bos is not None
    self.add_space_prefix = kv.get("tokenizer.ggml.add_space_prefix", self.model == "llama")
    merges = kv.get("tokenizer.ggml.merges", [])
    # keyed by the metadata's own "left right" strings: tuples of split-off copies cost ~150 bytes more per merge (~7 MiB
    # for a 49k-merge vocabulary). Where a piece holds a space itself that key is ambiguous, so those keep the pairs
    self._pair_keys = any(m.count(" ") != 1 for m in merges)
    self.ranks: dict = {(tuple(m.split(" ", 1)) if self._pair_keys else m): r for r, m in enumerate(merges)}
    if self.model not in ("llama", "gpt2"): raise ValueError(f"tokenizer.ggml.model {self.model!r} is not supported (llama or gpt2)")
    self.pre: PreTokenizer | None
    self.ignore_merges: bool
    self.pre, self.ignore_merges = PreTokenizer.for_gguf(kv.get("tokenizer.ggml.pre")) if self.model == "gpt2" else (None, False)
    if self.model == "gpt2" and "tokenizer.pre_regexes" in kv:   # an HF tokenizer.json brings its own regexes (llm/hf.py)
      self.pre, self.ignore_merges = PreTokenizer(kv["tokenizer.pre_regexes"]), bool(kv.get("tokenizer.ignore_merges"))
    # control (3) and user-defined (4) tokens are matched as whole strings before normal tokenization; found by type
    # and looked up by text, so building a tokenizer decodes only those pieces, not the whole vocabulary
    self.special_pieces = [self.tokens[i] for i, ty in enumerate(self.types) if ty in (3, 4)]   # control and user-defined, by id
    sp = sorted({t for t in self.special_pieces if t}, key=len, reverse=True)
    self.special_re = _longest_of(sp) if sp else None
    self.stop = {i for t in STOP_PIECES for i in self.tokens.scan_ids_of(t)}
    if self.eos is not None: self.stop.add(self.eos)

  def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
    out = [self.bos] if (self.add_bos if add_bos is None else add_bos) else []
    parts = self.special_re.split(text) if self.special_re else [text]
    after_special = True   # SentencePiece adds its space to the text at the start and after every special token
    for p in parts:
      if not p: continue
      if p in self.ids and self.types[self.ids[p]] in (3, 4): out.append(self.ids[p]); after_special = True
      else:
        out += self._spm(p, after_special) if self.model == "llama" else self._bpe(p)
        after_special = False
    return out

  def _spm(self, text: str, prefix: bool) -> list[int]:
    s = ((" " if prefix and self.add_space_prefix else "") + text).replace(" ", "▁")
    def priority(a: str, b: str):   # SentencePiece's BPE-with-scores: the joined piece that scores highest goes first
      j = self.ids.get(a + b)
      return None if j is None else -self.scores[j]
    out = []
    for sy in merge_pairs(list(s), priority):
      if sy in self.ids: out.append(self.ids[sy])
      else: out += [self.ids.get(f"<0x{b:02X}>", self.ids.get("<unk>", 0)) for b in sy.encode()]   # byte fallback
    return out

  def _bpe(self, text: str) -> list[int]:
    out: list[int] = []
    if self.pre is None: raise ValueError("a SentencePiece tokenizer has no BPE pre-tokenizer")   # only gpt2 models get here
    for word in self.pre.split(text):
      # words repeat a lot in real text; very long ones (hostile input) are not worth keeping
      out += self._bpe_word(word) if len(word) <= 64 else self._bpe_word_uncached(word)
    return out

  def _bpe_word_uncached(self, word: str) -> tuple[int, ...]:
    bc, out = _byte_chars(), []
    if self.ignore_merges and (whole := "".join(bc[b] for b in word.encode())) in self.ids: return (self.ids[whole],)
    rank = (lambda a, b: self.ranks.get((a, b))) if self._pair_keys else (lambda a, b: self.ranks.get(f"{a} {b}"))
    for sy in merge_pairs([bc[b] for b in word.encode()], rank):   # lowest rank first
      if sy in self.ids: out.append(self.ids[sy])
      else: out += [self.ids[c] for c in sy if c in self.ids]
    return tuple(out)

  def decode(self, ids: list[int], skip_special: bool = True) -> str:
    return self.decode_bytes(ids, skip_special).decode("utf-8", errors="replace")

  def decode_bytes(self, ids: list[int], skip_special: bool = True, strip_prefix: bool = True) -> bytes:
    buf, first = bytearray(), strip_prefix
    for i in ids:
      b, is_text = self.piece_bytes(i, skip_special, first)
      buf += b
      first = first and not is_text
    return bytes(buf)

  def piece_bytes(self, i: int, skip_special: bool = True, strip_space: bool = False) -> tuple[bytes, bool]:
    """The bytes token i stands for, and whether it is a text piece (the first one drops SentencePiece's added space)."""
    t, ty = self.tokens[i], self.types[i]
    if ty in (2, 3) and skip_special: return b"", False
    if self.model != "llama": return (bytes(inv[c] for c in t if c in (inv := _byte_values())) if ty != 3 else t.encode()), False
    if ty == 6 and re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", t): return bytes([int(t[3:5], 16)]), False
    s = t.replace("▁", " ")
    if strip_space and self.add_space_prefix and s.startswith(" "): s = s[1:]
    return s.encode(), True

class TextStream:
  """Decodes generated tokens one at a time for streaming: add() returns the text that just became complete (a UTF-8
  character split across tokens waits for its last byte), flush() the rest; together they equal Tokenizer.decode."""
  def __init__(self, tok: Tokenizer, skip_special: bool = True):
    self.tok, self.skip_special, self.first = tok, skip_special, True
    self.utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
  def add(self, i: int) -> str:
    b, is_text = self.tok.piece_bytes(i, self.skip_special, self.first)
    self.first = self.first and not is_text
    return self.utf8.decode(b)
  def flush(self) -> str: return self.utf8.decode(b"", final=True)
