"""BERT encoder (Devlin et al.) and the sentence-transformers recipe on top of it: mean pooling over the attention mask, then L2
normalization. Attribute names follow Hugging Face's BertModel, so a `model.safetensors` / `pytorch_model.bin` state dict loads
as is. The WordPiece tokenizer reads a BERT `vocab.txt` (uncased: lowercase, accents stripped)."""
from __future__ import annotations
import json, math, os, unicodedata
from dataclasses import dataclass, fields
from typing import Callable
import numpy as np
from tinycore.tensor import Tensor
from tinycore import nn

@dataclass(frozen=True)
class BertConfig:
  vocab_size: int = 30522
  hidden_size: int = 384
  num_hidden_layers: int = 6
  num_attention_heads: int = 12
  intermediate_size: int = 1536
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  hidden_act: str = "gelu"
  @staticmethod
  def from_json(fn) -> BertConfig:
    with open(fn) as f: d = json.load(f)
    return BertConfig(**{k.name: d[k.name] for k in fields(BertConfig) if k.name in d})

def gelu_erf(x: Tensor) -> Tensor: return 0.5 * x * (1 + (x * (1 / math.sqrt(2))).erf())   # BERT's "gelu" is the exact one, not tanh
_ACT: dict[str, Callable[[Tensor], Tensor]] = {"gelu": gelu_erf, "gelu_new": Tensor.gelu, "gelu_pytorch_tanh": Tensor.gelu, "relu": Tensor.relu}

class Lookup:
  """An embedding table read by row index. nn.Embedding is a one-hot product (differentiable, fuses), which costs
  vocab*dim MACs per token -- 12M for BERT's 30522-word table, as much as the whole encoder. For inference a gather of
  rows is the right op, so the indices (host data anyway) pick rows on the host and only those rows go to the device."""
  def __init__(self, num: int, dim: int): self.weight = Tensor.zeros(num, dim).contiguous()
  def __call__(self, idx: np.ndarray) -> Tensor:
    # host copy, refreshed when the weight is replaced (load_state_dict); keyed by id so no UOp sits in the state walk
    if getattr(self, "_host", (None,))[0] != id(self.weight.uop): self._host = (id(self.weight.uop), self.weight.numpy())
    return Tensor(self._host[1][np.asarray(idx)], device=self.weight.device)

class BertEmbeddings:
  def __init__(self, c: BertConfig):
    self.word_embeddings, self.position_embeddings = Lookup(c.vocab_size, c.hidden_size), Lookup(c.max_position_embeddings, c.hidden_size)
    self.token_type_embeddings = Lookup(c.type_vocab_size, c.hidden_size)
    self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
  def gather(self, ids: np.ndarray, type_ids: np.ndarray) -> tuple[Tensor, Tensor, Tensor]:
    """The word, position and token-type rows, (B, T, hidden) each: realized inputs, so a TinyJit can take them."""
    pos = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    return self.word_embeddings(ids), self.position_embeddings(pos), self.token_type_embeddings(type_ids)
  def __call__(self, w: Tensor, p: Tensor, t: Tensor) -> Tensor: return self.LayerNorm(w + p + t)

class BertSelfAttention:
  def __init__(self, c: BertConfig):
    self.heads, self.head_dim = c.num_attention_heads, c.hidden_size // c.num_attention_heads
    self.query, self.key, self.value = (nn.Linear(c.hidden_size, c.hidden_size) for _ in range(3))
  def __call__(self, x: Tensor, mask: Tensor) -> Tensor:
    B, T, D = x.shape
    q, k, v = (l(x).reshape(B, T, self.heads, self.head_dim).transpose(1, 2) for l in (self.query, self.key, self.value))
    return q.scaled_dot_product_attention(k, v, attn_mask=mask).transpose(1, 2).reshape(B, T, D)

class BertSelfOutput:
  """dense + residual + post-LayerNorm (used after attention and after the FFN)."""
  def __init__(self, d_in: int, d_out: int, eps: float):
    self.dense, self.LayerNorm = nn.Linear(d_in, d_out), nn.LayerNorm(d_out, eps=eps)
  def __call__(self, h: Tensor, resid: Tensor) -> Tensor: return self.LayerNorm(self.dense(h) + resid)

class BertAttention:
  def __init__(self, c: BertConfig):
    self.self, self.output = BertSelfAttention(c), BertSelfOutput(c.hidden_size, c.hidden_size, c.layer_norm_eps)
  def __call__(self, x: Tensor, mask: Tensor) -> Tensor: return self.output(self.self(x, mask), x)

class BertIntermediate:
  def __init__(self, c: BertConfig): self.dense, self.act = nn.Linear(c.hidden_size, c.intermediate_size), _ACT[c.hidden_act]
  # contiguous: otherwise the scheduler fuses the erf GELU into the next matmul's loads and recomputes it once per output
  # column (384x the work; that one kernel was 90% of the run time)
  def __call__(self, x: Tensor) -> Tensor: return self.act(self.dense(x)).contiguous()

class BertLayer:
  def __init__(self, c: BertConfig):
    self.attention, self.intermediate = BertAttention(c), BertIntermediate(c)
    self.output = BertSelfOutput(c.intermediate_size, c.hidden_size, c.layer_norm_eps)
  def __call__(self, x: Tensor, mask: Tensor) -> Tensor:
    a = self.attention(x, mask)
    return self.output(self.intermediate(a), a)

class BertEncoder:
  def __init__(self, c: BertConfig): self.layer = [BertLayer(c) for _ in range(c.num_hidden_layers)]
  def __call__(self, x: Tensor, mask: Tensor) -> Tensor:
    for l in self.layer: x = l(x, mask)
    return x

class BertPooler:
  def __init__(self, c: BertConfig): self.dense = nn.Linear(c.hidden_size, c.hidden_size)
  def __call__(self, h: Tensor) -> Tensor: return self.dense(h[:, 0]).tanh()

class BertModel:
  def __init__(self, c: BertConfig):
    self.config = c
    self.embeddings, self.encoder, self.pooler = BertEmbeddings(c), BertEncoder(c), BertPooler(c)
  def inputs(self, ids: np.ndarray, attention_mask: np.ndarray, type_ids: np.ndarray | None = None) -> tuple[Tensor, ...]:
    """Tokenizer arrays (B, T) -> the Tensors `hidden` takes: embedding rows and the float attention mask."""
    ids = np.asarray(ids)
    if ids.shape[1] > self.config.max_position_embeddings:
      raise ValueError(f"sequence of {ids.shape[1]} tokens > {self.config.max_position_embeddings}")
    rows = self.embeddings.gather(ids, np.zeros_like(ids) if type_ids is None else np.asarray(type_ids))
    return (*rows, Tensor(np.asarray(attention_mask, dtype=np.float32), device=rows[0].device))
  def hidden(self, w: Tensor, p: Tensor, t: Tensor, mask: Tensor) -> Tensor:
    # (B, 1, 1, T) bool: every query attends to the real keys only; padded queries compute garbage that pooling drops
    return self.encoder(self.embeddings(w, p, t), (mask > 0.5).reshape(mask.shape[0], 1, 1, mask.shape[1]))
  def __call__(self, ids: np.ndarray, attention_mask: np.ndarray, type_ids: np.ndarray | None = None) -> Tensor:
    """Last hidden states (B, T, hidden). ids/attention_mask/type_ids: (B, T) integer arrays from the tokenizer."""
    return self.hidden(*self.inputs(ids, attention_mask, type_ids))

def mean_pool(h: Tensor, mask: Tensor) -> Tensor:
  m = mask.float().unsqueeze(-1)
  return (h * m).sum(1) / m.sum(1).maximum(1e-9)

def l2_normalize(x: Tensor, eps: float = 1e-12) -> Tensor: return x / x.square().sum(-1, keepdim=True).sqrt().maximum(eps)

# ---- WordPiece tokenizer (BertTokenizer's basic + wordpiece steps)
def _is_punct(ch: str) -> bool:
  cp = ord(ch)   # BERT counts every non-alphanumeric ASCII char as punctuation ("$", "^", "`" aren't Unicode P*)
  return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or unicodedata.category(ch).startswith("P")
def _is_cjk(cp: int) -> bool:
  return any(a <= cp <= b for a, b in ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
                                       (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))

class WordPieceTokenizer:
  def __init__(self, vocab_file, lowercase: bool = True, max_len: int = 512, max_word_chars: int = 100):
    with open(vocab_file, encoding="utf-8") as f: self.vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
    self.lowercase, self.max_len, self.max_word_chars = lowercase, max_len, max_word_chars
    self.cls, self.sep, self.pad, self.unk = (self.vocab[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]"))

  def basic(self, text: str) -> list[str]:
    """Clean (drop control chars, whitespace -> space), space out CJK, lowercase + strip accents, split off punctuation."""
    out = []
    for ch in text:
      cp = ord(ch)
      if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch).startswith("C") and ch not in "\t\n\r"): continue
      out.append(" " if ch.isspace() else f" {ch} " if _is_cjk(cp) else ch)
    words = []
    for w in "".join(out).split():
      if self.lowercase: w = "".join(c for c in unicodedata.normalize("NFD", w.lower()) if unicodedata.category(c) != "Mn")
      cur = ""
      for ch in w:
        if _is_punct(ch):
          if cur: words.append(cur)
          words.append(ch); cur = ""
        else: cur += ch
      if cur: words.append(cur)
    return words

  def wordpiece(self, word: str) -> list[int]:
    """Greedy longest-match-first; pieces after the first carry '##'. A word with no full cover is one [UNK]."""
    if len(word) > self.max_word_chars: return [self.unk]
    ids, start = [], 0
    while start < len(word):
      for end in range(len(word), start, -1):
        if (i := self.vocab.get(("##" if start else "") + word[start:end])) is not None: break
      else: return [self.unk]
      ids.append(i); start = end
    return ids

  def encode(self, text: str, max_len: int | None = None) -> list[int]:
    ids = [i for w in self.basic(text) for i in self.wordpiece(w)]
    return [self.cls] + ids[:(max_len or self.max_len) - 2] + [self.sep]

  def __call__(self, texts: list[str], max_len: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input_ids, attention_mask, token_type_ids), each (B, longest) int32, right-padded with [PAD]."""
    enc = [self.encode(t, max_len) for t in texts]
    T = max(len(e) for e in enc)
    ids = np.full((len(enc), T), self.pad, dtype=np.int32)
    mask = np.zeros((len(enc), T), dtype=np.int32)
    for r, e in enumerate(enc): ids[r, :len(e)], mask[r, :len(e)] = e, 1
    return ids, mask, np.zeros_like(ids)

# ---- a sentence-transformers model directory (config.json, vocab.txt, model.safetensors or pytorch_model.bin)
class SentenceEncoder:
  def __init__(self, model_dir, device: str | None = None):
    from tinycore.nn.state import safe_load, torch_load, load_state_dict
    self.config = BertConfig.from_json(os.path.join(model_dir, "config.json"))
    self.max_len = 512
    if os.path.exists(sbc := os.path.join(model_dir, "sentence_bert_config.json")):
      with open(sbc) as f: self.max_len = json.load(f).get("max_seq_length", 512)
    tc = {}
    if os.path.exists(tcf := os.path.join(model_dir, "tokenizer_config.json")):
      with open(tcf) as f: tc = json.load(f)
    self.tokenizer = WordPieceTokenizer(os.path.join(model_dir, "vocab.txt"), lowercase=tc.get("do_lower_case", True), max_len=self.max_len)
    self.model = BertModel(self.config)
    st = os.path.join(model_dir, "model.safetensors")
    sd = safe_load(st, device) if os.path.exists(st) else torch_load(os.path.join(model_dir, "pytorch_model.bin"))
    sd = {k.removeprefix("bert."): v for k, v in sd.items() if not k.endswith("position_ids")}   # a buffer, not a weight
    if device is not None: sd = {k: v.to(device) for k, v in sd.items()}
    load_state_dict(self.model, sd)

    self._jits: dict = {}

  def _embed(self, w: Tensor, p: Tensor, t: Tensor, mask: Tensor) -> Tensor: return l2_normalize(mean_pool(self.model.hidden(w, p, t, mask), mask))

  def encode(self, sentences: list[str], batch_size: int = 32, jit: bool = True) -> np.ndarray:
    """(N, hidden) float32 unit vectors, like SentenceTransformer.encode for this model. jit: one TinyJit per (batch, length)
    shape, so a repeated shape replays its kernels without rebuilding and scheduling the graph."""
    from tinycore.engine.jit import TinyJit
    out = []
    for i in range(0, len(sentences), batch_size):
      ids, mask, types = self.tokenizer(sentences[i:i + batch_size], self.max_len)
      args = self.model.inputs(ids, mask, types)
      fn = self._jits.setdefault(ids.shape, TinyJit(self._embed)) if jit else self._embed
      out.append(fn(*args).numpy())
    return np.concatenate(out)
