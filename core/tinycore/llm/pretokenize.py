"""Byte-level BPE pre-tokenizers: how a text is cut into words before merging, per GGUF `tokenizer.ggml.pre`.

Each model family cuts with its own list of regexes (the lists llama.cpp uses per pre type; HF tokenizers express the
same as a Sequence of Split pre-tokenizers). A regex is applied to every piece the previous one left: its matches and
the gaps between them all become pieces ("isolated" splitting). The regexes use `\\p{L}`-style Unicode classes, which
Python's `re` lacks, so they are translated to explicit character classes built from `unicodedata`; `\\s` is the
Unicode White_Space set (what Oniguruma and Rust use), not Python's, which also counts \\x1c-\\x1f."""
from __future__ import annotations
import itertools, re, unicodedata
from functools import lru_cache

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"""
LLAMA3 = (r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
          r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
         r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
TEKKEN = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"""
          r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""")
GPT4O = (r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?"""
         r"""[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*"""
         r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
DEEPSEEK_LLM = [r"[\r\n]", (r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝ"
                            "\u1f5f-\u1f7d" r"ᾀ-ᾴᾶ-ᾼ" "\u1fbe" r"ῂ-ῄῆ-ῌ" "\u1fd0-\u1fd3" r"" "\u1fd6-\u1fdb" r"ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ"
                            "\u2126" r"ℨ" "\u212a" r"-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"),
                r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}+"]
DEEPSEEK_CODER = [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}"]
DEEPSEEK_V3 = [r"\p{N}{1,3}", r"[一-龥\u3040-ゟ゠-ヿ]+",
               r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""]
BLOOM = [r" ?[^(\s|.,!?…。，、।۔،)]+"]

# tokenizer.ggml.pre -> (regexes, ignore_merges): ignore_merges emits a word that is itself in the vocabulary as one token
# without merging (llama 3's tokenizer.json sets it)
PRE_TOKENIZERS: dict[str, tuple[list[str], bool]] = {
  "default": ([r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"], False),
  "llama3": ([LLAMA3], True), "llama-v3": ([LLAMA3], True), "llama-bpe": ([LLAMA3], True), "falcon3": ([LLAMA3], True),
  "dbrx": ([LLAMA3], False), "smaug-bpe": ([LLAMA3], False), "pixtral": ([TEKKEN], False),
  "gpt-2": ([GPT2], False), "phi-2": ([GPT2], False), "mpt": ([GPT2], False), "olmo": ([GPT2], False), "jais": ([GPT2], False),
  "starcoder": ([r"\p{N}", GPT2], False), "smollm": ([r"\p{N}", GPT2], False), "refact": ([r"\p{N}", GPT2], False),
  "command-r": ([r"\p{N}", GPT2], False), "codeshell": ([r"\p{N}", GPT2], False), "exaone": ([r"\p{N}", GPT2], False),
  "minerva-7b": ([r"\p{N}", GPT2], False),
  "falcon": ([r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"], False),
  "qwen2": ([QWEN2], False), "stablelm2": ([QWEN2], False), "deepseek-r1-qwen": ([QWEN2], False), "megrez": ([QWEN2], False),
  "deepseek-llm": (DEEPSEEK_LLM, False), "deepseek-coder": (DEEPSEEK_CODER, False), "deepseek-v3": (DEEPSEEK_V3, False),
  "tekken": ([TEKKEN], False), "gpt-4o": ([GPT4O], False), "llama4": ([GPT4O], False), "bloom": (BLOOM, False), "poro-chat": (BLOOM, False),
  "gpt3-finnish": (BLOOM, False), "viking": (BLOOM + [r"\p{N}"], False), "chatglm-bpe": ([LLAMA3], False),
}

# Unicode White_Space: what `\s` means to Oniguruma (HF tokenizers) and to Rust's regex
_WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"

@lru_cache(None)
def _categories() -> dict[str, list[tuple[int, int]]]:
  """General category (two letters) -> sorted code point ranges, for every code point (once per process). Planes 4-13
  are unassigned and 15-16 private use, so only the rest is asked of unicodedata (a quarter of the calls)."""
  out: dict[str, list[tuple[int, int]]] = {}
  def add(c: str, lo: int, hi: int):
    ranges = out.setdefault(c, [])
    if ranges and ranges[-1][1] == lo - 1: ranges[-1] = (ranges[-1][0], hi)
    else: ranges.append((lo, hi))
  def scan(lo: int, hi: int):   # runs of one category, found by groupby over map (no Python call per code point)
    at = lo
    for c, run in itertools.groupby(map(unicodedata.category, map(chr, range(lo, hi)))):
      n = sum(1 for _ in run)
      add(c, at, at + n - 1)
      at += n
  scan(0, 0x40000)
  add("Cn", 0x40000, 0xDFFFF)
  scan(0xE0000, 0xF0000)
  for base in (0xF0000, 0x100000): add("Co", base, base + 0xFFFD); add("Cn", base + 0xFFFE, base + 0xFFFF)
  return out

def _class_body(ranges: list[tuple[int, int]]) -> str:
  """Ranges as the inside of a `re` character class (no brackets), every character escaped."""
  esc = lambda cp: "\\" + chr(cp) if chr(cp) in "\\]^-[" else chr(cp) if cp > 0x20 else f"\\x{cp:02x}"
  return "".join(esc(a) if a == b else f"{esc(a)}-{esc(b)}" for a, b in ranges)

@lru_cache(None)
def unicode_class(name: str) -> str:
  """`\\p{name}` as the body of a character class: a one-letter major class (L, N, P, M, S, Z, C) or a category (Lu)."""
  cats = _categories()
  keys = [k for k in cats if k == name or (len(name) == 1 and k[0] == name)]
  if not keys: raise ValueError(f"unknown Unicode class \\p{{{name}}} in a pre-tokenizer regex")
  return _class_body(sorted(r for k in keys for r in cats[k]))

def _space_body() -> str: return _class_body([(ord(c), ord(c)) for c in _WHITE_SPACE])

def translate(pattern: str) -> str:
  """An Oniguruma/PCRE-style pre-tokenizer regex as a Python `re` pattern: \\p{..}/\\P{..}, \\s/\\S and `$` (end of a line,
  as Oniguruma reads it) are rewritten; everything else passes through."""
  out, i, in_class = [], 0, False
  while i < len(pattern):
    c = pattern[i]
    if c == "\\" and i + 1 < len(pattern):
      e = pattern[i + 1]
      if e in "pP" and pattern[i + 2:i + 3] == "{":
        end = pattern.index("}", i)
        body = unicode_class(pattern[i + 3:end])
        if e == "P" and in_class: raise ValueError("\\P{..} inside a character class is not supported")
        out.append(body if in_class else f"[{'^' if e == 'P' else ''}{body}]")
        i = end + 1
        continue
      if e in "sS":
        if e == "S" and in_class: raise ValueError("\\S inside a character class is not supported")
        out.append(_space_body() if in_class else f"[{'^' if e == 'S' else ''}{_space_body()}]")
        i += 2
        continue
      out.append(pattern[i:i + 2])
      i += 2
      continue
    if c == "[" and not in_class:
      in_class = True
      out.append(c)
      if pattern[i + 1:i + 2] == "^": out.append("^"); i += 1
      if pattern[i + 1:i + 2] == "]": out.append("\\]"); i += 1   # a leading ']' is a literal
    elif c == "]" and in_class: in_class = False; out.append(c)
    elif c == "[" and in_class: out.append("\\[")
    elif c == "$" and not in_class: out.append("(?m:$)")
    else: out.append(c)
    i += 1
  return "".join(out)

MAX_PATTERN = 4096   # the real pre-tokenizer regexes are a few hundred characters

def check_linear(pattern: str) -> None:
  """Refuse a regex that can backtrack exponentially: an HF tokenizer.json brings its own, and a hostile one such as
  `(a+)+$` would hang tokenizing. Inside an unbounded repeat there may be no other repeat and no alternation (the real
  pre-tokenizers only repeat character classes), and there are no backreferences."""
  try: import re._parser as sre   # the parser `re` itself uses (sre_parse before 3.11)
  except ImportError: import sre_parse as sre
  if len(pattern) > MAX_PATTERN: raise ValueError(f"pre-tokenizer regex of {len(pattern)} characters (limit {MAX_PATTERN})")
  try: tree = sre.parse(translate(pattern))
  except re.error as e: raise ValueError(f"pre-tokenizer regex {pattern[:80]!r} is not a valid regex: {e}") from None
  REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT} | ({sre.POSSESSIVE_REPEAT} if hasattr(sre, "POSSESSIVE_REPEAT") else set())
  def walk(items, in_unbounded: bool) -> None:
    for op, av in items:
      if op is sre.GROUPREF or op is sre.GROUPREF_EXISTS: raise ValueError(f"pre-tokenizer regex {pattern[:80]!r} uses a backreference")
      if op in REPEATS:
        lo, hi, body = av
        if in_unbounded and hi > 1: raise ValueError(f"pre-tokenizer regex {pattern[:80]!r} nests a repeat in a repeat (can take exponential time)")
        walk(body, in_unbounded or hi == sre.MAXREPEAT)
      elif op is sre.BRANCH:
        if in_unbounded: raise ValueError(f"pre-tokenizer regex {pattern[:80]!r} repeats an alternation (can take exponential time)")
        for alt in av[1]: walk(alt, in_unbounded)
      elif op is sre.SUBPATTERN: walk(av[-1], in_unbounded)
      elif op in (sre.ASSERT, sre.ASSERT_NOT): walk(av[1], in_unbounded)
  walk(tree, False)

class PreTokenizer:
  """Cuts text into the words BPE merges within, by a list of regexes applied in turn ("isolated" splitting)."""
  def __init__(self, patterns: list[str]):
    if not patterns: raise ValueError("a pre-tokenizer needs at least one regex")
    if not all(isinstance(p, str) for p in patterns): raise ValueError("pre-tokenizer regexes must be strings")
    for p in patterns: check_linear(p)
    self.patterns = list(patterns)
    self.regexes = [re.compile(translate(p)) for p in patterns]

  @staticmethod
  def for_gguf(pre: str | None) -> tuple[PreTokenizer, bool]:
    """(pre-tokenizer, ignore_merges) for a GGUF's tokenizer.ggml.pre (missing: llama.cpp's "default")."""
    name = "default" if pre is None else pre
    if not isinstance(name, str) or name not in PRE_TOKENIZERS:
      raise ValueError(f"tokenizer.ggml.pre {pre!r} is not a pre-tokenizer this runner knows (known: {', '.join(sorted(PRE_TOKENIZERS))})")
    pats, ignore = PRE_TOKENIZERS[name]
    return _cached(tuple(pats)), ignore

  def split(self, text: str) -> list[str]:
    pieces = [text]
    for rx in self.regexes:
      nxt: list[str] = []
      for p in pieces:
        at = 0
        for m in rx.finditer(p):
          if m.start() == m.end(): continue   # an empty match splits nothing
          if m.start() > at: nxt.append(p[at:m.start()])
          nxt.append(m.group())
          at = m.end()
        if at < len(p): nxt.append(p[at:])
      pieces = nxt
    return pieces

@lru_cache(None)
def _cached(patterns: tuple[str, ...]) -> PreTokenizer: return PreTokenizer(list(patterns))
