"""Tokenizers checked token for token against HF `tokenizers` on a corpus of tricky text. No downloads: each test trains
a small vocabulary with tokenizers' own BPE trainer behind the pre-tokenizer a model family uses, then builds both the HF
tokenizer (the reference) and the GGUF metadata our Tokenizer reads from that same vocabulary and merges."""
from __future__ import annotations
import json, random
import pytest
from tinycore.llm.tokenizer import Tokenizer
from tinycore.llm.pretokenize import PRE_TOKENIZERS, PreTokenizer, translate

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Regex, normalizers, pre_tokenizers, models, trainers

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TRICKY = [
  "Hello world", "  leading spaces", "trailing   ", "\r\n", "line1\r\nline2\r\n\r\nline3", "\n\n\n    indented", " ___", "a ___ b __init__",
  "tabs\t\there\t", "\t\n\t", " \n \n", "a  b   c    d     e", "def f(x):\n    return x**2  # comment\n", "if (a<=b && c!=d) { x += 1; }\r\n",
  "1234567890", "3.14159 and 1,000,000", "x=12345678901234567890", "v1.2.3-rc4", "naïve café résumé", "Привет, мир!", "日本語のテキスト",
  "中文字符测试，标点。", "한국어 텍스트", "emoji 😀🎉👍🏽 👨‍👩‍👧", "CamelCaseWord HTTPServer iPhone XMLHttpRequest",
  "it's don't we'll I'M YOU'RE they'D", "¼ ½ ² ³ Ⅻ ٣", "\u00a0nbsp\u3000ideographic\u2003em", "\x1c\x1f control\x0b\x0c",
  "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n", "arrows → ← and math ∑∫ ≤", "ﬁ ligature", "combining e\u0301 and a\u0308",
  "URL https://example.com/path?q=1&r=2#frag", "'quoted' \"double\" `tick`", "$100 + 20% = ^~|<>", "…。，、।۔،", "snake_case_name = other_name_2",
  "   \n", "Ωmega ΣΑΣ straße", "ÀÉÎÕÜ àéîõü", "wordwithnospace" * 3,
]

def corpus(n: int = 300, seed: int = 0) -> list[str]:
  """The tricky strings, then random mixes of their pieces (joins make runs the hand-written ones lack)."""
  rng = random.Random(seed)
  frags = [w for s in TRICKY for w in s.replace("\n", " \n ").split(" ")] + [" ", "  ", "\n", "\r\n", "\t", "    ", "", "0", "42", "😀"]
  return TRICKY + ["".join(rng.choice(frags) + rng.choice(["", " ", "  ", "\n"]) for _ in range(rng.randint(1, 14))) for _ in range(n)]

TRAIN = corpus(600, seed=1) + ["the quick brown fox jumps over the lazy dog " * 3, "for i in range(10):\n    print(i)\n" * 3, "1234 5678 9012 " * 5]

def spm_bpe_vocab(vocab_size: int, prefix: bool) -> tuple[list[str], list[float], list[int]]:
  """A SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte pieces, then pieces learned (in merge order) from
  text with spaces as '▁'; scores fall with the order, so the higher score merges first as SentencePiece does."""
  tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
  tok.normalizer = normalizers.Sequence(([normalizers.Prepend("▁")] if prefix else []) + [normalizers.Replace(" ", "▁")])
  tok.pre_tokenizer = pre_tokenizers.Split(Regex("▁[^▁]*|[^▁]+"), behavior="isolated")   # train on words; the tokenizer merges across them
  tok.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=vocab_size, limit_alphabet=70, special_tokens=["<unk>", "<s>", "</s>"]))
  learned = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
  pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [p for p, _ in learned if p not in ("<unk>", "<s>", "</s>")]
  types = [2, 3, 3] + [6] * 256 + [1] * (len(pieces) - 259)
  return pieces, [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(pieces) - 259)], types

def hf_spm(pieces: list[str], scores: list[float], types: list[int], prefix: bool) -> tokenizers.Tokenizer:
  """HF's form of a SentencePiece BPE (as its converter writes it): every split of a piece into two pieces is a merge,
  ranked by the joined piece's score; unknown characters fall back to byte pieces."""
  ids = {p: i for i, p in enumerate(pieces)}
  merges = sorted(((p[:k], p[k:]) for i, p in enumerate(pieces) if types[i] == 1 for k in range(1, len(p)) if p[:k] in ids and p[k:] in ids),
                  key=lambda m: -scores[ids[m[0] + m[1]]])
  tok = tokenizers.Tokenizer(models.BPE(ids, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
  tok.normalizer = normalizers.Sequence(([normalizers.Prepend("▁")] if prefix else []) + [normalizers.Replace(" ", "▁")])
  tok.add_special_tokens([AddedToken(p, special=True, normalized=False) for p, t in zip(pieces, types) if t == 3])
  return tok

def byte_level_bpe(pre: str, vocab_size: int = 700) -> tuple[tokenizers.Tokenizer, dict]:
  """A byte-level BPE trained behind `pre`'s regexes, as an HF tokenizer and as our GGUF metadata."""
  regexes, ignore_merges = PRE_TOKENIZERS[pre]
  pt = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r), behavior="isolated") for r in regexes] +
                               [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
  tok = tokenizers.Tokenizer(models.BPE())
  tok.pre_tokenizer = pt
  tok.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
  spec = json.loads(tok.to_str())
  spec["model"]["ignore_merges"] = ignore_merges
  tok = tokenizers.Tokenizer.from_str(json.dumps(spec))
  vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
  assert [i for _, i in vocab] == list(range(len(vocab)))
  merges = [" ".join(m) if isinstance(m, list) else m for m in spec["model"]["merges"]]
  kv = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": [t for t, _ in vocab],
        "tokenizer.ggml.token_type": [3 if t in SPECIALS else 1 for t, _ in vocab], "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.add_bos_token": False}
  return tok, kv

def disagreements(ours: Tokenizer, hf: tokenizers.Tokenizer, texts: list[str]) -> list[tuple[str, list[int], list[int]]]:
  out = []
  for s in texts:
    a, b = ours.encode(s, add_bos=False), hf.encode(s, add_special_tokens=False).ids
    if a != b: out.append((s, a, b))
  return out

# one pre name per distinct regex list (aliases share a list: checking one checks them all)
DISTINCT = {}
for _name, (_rx, _ig) in PRE_TOKENIZERS.items(): DISTINCT.setdefault((tuple(_rx), _ig), _name)

@pytest.mark.parametrize("pre", sorted(DISTINCT.values()))
def test_byte_level_bpe_matches_hf(pre):
  hf, kv = byte_level_bpe(pre)
  ours, texts = Tokenizer(kv), corpus()
  bad = disagreements(ours, hf, texts)
  assert not bad, f"{pre}: {len(bad)}/{len(texts)} texts differ, first: {bad[0]!r}"
  for s in texts: assert ours.decode(ours.encode(s, add_bos=False), skip_special=False) == s   # byte-level BPE loses nothing

@pytest.mark.parametrize("style", ["llama2_mistral", "gemma"])
def test_sentencepiece_matches_hf(style):
  prefix = style != "gemma"   # gemma's SentencePiece adds no leading space
  pieces, scores, types = spm_bpe_vocab(500, prefix)
  kv = {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": pieces, "tokenizer.ggml.scores": scores, "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.add_space_prefix": prefix}
  ours, hf, texts = (Tokenizer(kv), hf_spm(pieces, scores, types, prefix),
                     [s.replace("<|im_start|>", "<s>").replace("<|im_end|>", "</s>") for s in corpus()])
  bad = disagreements(ours, hf, texts)
  assert not bad, f"{style}: {len(bad)}/{len(texts)} texts differ, first: {bad[0]!r}"
  assert any(t == 6 for i in ours.encode("emoji 😀 日本", add_bos=False) for t in [types[i]])   # the corpus does reach byte fallback

def test_translate_classes():
  # \p{N} covers more than decimal digits, \s is Unicode White_Space (not Python's, which adds \x1c-\x1f)
  import re
  assert re.fullmatch(translate(r"\p{N}+"), "12½²Ⅻ٣") and not re.fullmatch(translate(r"\p{N}"), "a")
  assert re.fullmatch(translate(r"\s+"), " \t\u3000\u00a0\u2028") and not re.match(translate(r"\s"), "\x1c")
  assert re.fullmatch(translate(r"[^\s\p{L}\p{N}]+"), "!?…→😀") and not re.match(translate(r"[^\s\p{L}\p{N}]"), "é")
  with pytest.raises(ValueError, match="Unicode class"): translate(r"\p{Nope}")

def test_unknown_pre_is_a_clear_error():
  with pytest.raises(ValueError, match="tokenizer.ggml.pre 'no-such-pre'"): PreTokenizer.for_gguf("no-such-pre")

@pytest.mark.parametrize("kind", ["llama3", "qwen2", "gpt2_bytelevel_regex", "spm"])
def test_tokenizer_json_matches_hf(kind, tmp_path):
  """An HF checkpoint's tokenizer.json read by llm/hf.py (its own Split regexes, ignore_merges, ByteLevel's built-in
  regex, or SentencePiece converted to BPE with byte fallback) tokenizes as the HF tokenizer built from that file."""
  from tinycore.llm.hf import tokenizer_kv
  texts = corpus()
  if kind == "spm":
    pieces, scores, types = spm_bpe_vocab(500, True)
    hf = hf_spm(pieces, scores, types, True)
    texts = [s.replace("<|im_start|>", "<s>").replace("<|im_end|>", "</s>") for s in texts]
  elif kind == "gpt2_bytelevel_regex":   # GPT-2's own tokenizer.json: no Split, ByteLevel with use_regex
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.train_from_iterator(TRAIN, trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
  else: hf, _ = byte_level_bpe(kind)
  hf.save(str(tmp_path / "tokenizer.json"))
  ours = Tokenizer(tokenizer_kv(str(tmp_path), hf.get_vocab_size()))
  bad = disagreements(ours, hf, texts)
  assert not bad, f"{kind}: {len(bad)}/{len(texts)} texts differ, first: {bad[0]!r}"

def test_hostile_tokenizer_json_regexes_are_refused(tmp_path):
  """A tokenizer.json's regexes run on every prompt: one that can backtrack exponentially is refused when loading."""
  from tinycore.llm.hf import tokenizer_kv
  hf, _ = byte_level_bpe("qwen2")
  spec = json.loads(hf.to_str())
  for rx, why in [(r"(a+)+$", "nests a repeat"), (r"(x|xy)*z", "alternation"), (r"(\w)\1", "backreference"), ("[", "not a valid regex")]:
    spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = rx
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=why): Tokenizer(tokenizer_kv(str(tmp_path), 0))
  spec["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"
  (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
  with pytest.raises(ValueError, match="Split pre-tokenizer"): tokenizer_kv(str(tmp_path), 0)

def test_bos_from_the_post_processor_like_llama3(tmp_path):
  """llama 3's tokenizer.json adds BOS with a post-processor template (tokenizer_config has no add_bos_token)."""
  from tokenizers import processors
  from tinycore.llm.hf import tokenizer_kv
  hf, _ = byte_level_bpe("llama3")
  hf.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", hf.token_to_id("<|endoftext|>"))])
  hf.save(str(tmp_path / "tokenizer.json"))
  (tmp_path / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"}))
  ours = Tokenizer(tokenizer_kv(str(tmp_path), 0))
  for s in corpus(20):
    assert ours.encode(s) == hf.encode(s).ids, s
  assert ours.eos == hf.token_to_id("<|im_end|>")
