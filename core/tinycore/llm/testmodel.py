"""Tiny random llama-family GGUF files (with a real SentencePiece or BPE vocabulary) for tests and benchmarks."""
from __future__ import annotations
import numpy as np
from tinycore.llm.gguf_write import gguf_write
from tinycore.llm.tokenizer import _byte_chars

CHARS = "abcdefghijklmnopqrstuvwxyz.,!?'"
WORDS = ["th", "he", "the", "in", "er", "an", "on", "re", "ll", "llo", "hello", "or", "ld", "orld", "world", "is", "it", "at"]
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")

FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}   # llama.cpp's, minus IQ4_NL

def _vocab(kind: str) -> dict:
  if kind == "llama":   # pieces: specials, single chars, merged words (with and without the '▁' word marker)
    toks = (["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"] + ["▁"] + list(CHARS) + WORDS + ["▁" + w for w in WORDS]
            + ["▁" + c for c in "aiot"] + ["<0x0A>"])
    types = [2, 3, 3, 3, 3] + [1] * (len(toks) - 6) + [6]   # 6: a byte-fallback piece
    scores = [0.0] * 5 + [-1.0] * (1 + len(CHARS)) + [float(len(w)) for w in toks[6 + len(CHARS):-1]] + [0.0]
    return {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": toks, "tokenizer.ggml.scores": scores, "tokenizer.ggml.token_type": types,
            "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.unknown_token_id": 0}
  sp = _byte_chars()[ord(" ")]   # 'Ġ'
  merges: list[str] = []
  def add(w: str):   # merge until w is one symbol: apply the merges so far (in rank order), then join the first two left
    syms = list(w)
    while len(syms) > 1:
      ranked = [(merges.index(f"{a} {b}"), i) for i, (a, b) in enumerate(zip(syms, syms[1:])) if f"{a} {b}" in merges]
      if ranked: i = min(ranked)[1]
      else: merges.append(f"{syms[0]} {syms[1]}"); i = 0
      syms[i:i + 2] = [syms[i] + syms[i + 1]]
  for w in WORDS: add(w); add(sp + w)
  toks = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [sp, "\u010a"] + list(CHARS)   # \u010a: byte-level '\n'
  for m in merges:
    if (t := m.replace(" ", "")) not in toks: toks.append(t)
  return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": toks, "tokenizer.ggml.token_type": [3, 3, 3] + [1] * (len(toks) - 3),
          "tokenizer.ggml.merges": merges, "tokenizer.ggml.bos_token_id": 0, "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.add_bos_token": False}

def tiny_llama(path: str, dim=32, n_layers=2, n_heads=4, n_kv_heads=2, hidden=64, vocab_kind="llama", qtype="F32", tied=False,
               arch="llama", seed=0, ctx=256, theta=10000.0, vocab_size: int | None = None, pad_type: int = 5) -> dict:
  """Write a random model; returns the metadata. qtype (F32, F16 or a block format: Q4_0..Q8_0, Q2_K..Q6_K) applies to the 2-d matmul weights."""
  rng = np.random.default_rng(seed)
  kv = {"general.architecture": arch, "general.name": f"tiny-{arch}", **_vocab(vocab_kind), "tokenizer.chat_template": CHATML}
  if vocab_size is not None:   # pad with unused pieces (benchmark-sized models), typed `pad_type`: UNUSED (5) as llama.cpp's
    # <unusedN> are by default; as user-defined (4) they are special tokens, and 49k of them cost seconds to build a tokenizer
    kv["tokenizer.ggml.tokens"] = kv["tokenizer.ggml.tokens"] + [f"<unused{i}>" for i in range(vocab_size - len(kv["tokenizer.ggml.tokens"]))]
    n = len(kv["tokenizer.ggml.tokens"])
    kv["tokenizer.ggml.token_type"] = kv["tokenizer.ggml.token_type"] + [pad_type] * (n - len(kv["tokenizer.ggml.token_type"]))
    if "tokenizer.ggml.scores" in kv: kv["tokenizer.ggml.scores"] = kv["tokenizer.ggml.scores"] + [0.0] * (n - len(kv["tokenizer.ggml.scores"]))
  V, hd = len(kv["tokenizer.ggml.tokens"]), dim // n_heads
  kv.update({f"{arch}.{k}": v for k, v in {"embedding_length": dim, "block_count": n_layers, "attention.head_count": n_heads,
             "attention.head_count_kv": n_kv_heads, "feed_forward_length": hidden, "context_length": ctx, "rope.freq_base": theta,
             "attention.layer_norm_rms_epsilon": 1e-5, "rope.dimension_count": hd}.items()})
  mat = lambda o, i: (rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32)
  norm = lambda n: np.asarray(1 + 0.1 * rng.standard_normal(n), dtype=np.float32)
  t = {"token_embd.weight": (rng.standard_normal((V, dim)).astype(np.float32), qtype), "output_norm.weight": (norm(dim), "F32")}
  if not tied: t["output.weight"] = (mat(V, dim), qtype)
  for i in range(n_layers):
    b = f"blk.{i}."
    t.update({b + "attn_norm.weight": (norm(dim), "F32"), b + "ffn_norm.weight": (norm(dim), "F32"),
              b + "attn_q.weight": (mat(n_heads * hd, dim), qtype), b + "attn_k.weight": (mat(n_kv_heads * hd, dim), qtype),
              b + "attn_v.weight": (mat(n_kv_heads * hd, dim), qtype), b + "attn_output.weight": (mat(dim, n_heads * hd), qtype),
              b + "ffn_gate.weight": (mat(hidden, dim), qtype), b + "ffn_up.weight": (mat(hidden, dim), qtype),
              b + "ffn_down.weight": (mat(dim, hidden), qtype)})
    if arch == "qwen2":
      for proj, o in (("attn_q", n_heads * hd), ("attn_k", n_kv_heads * hd), ("attn_v", n_kv_heads * hd)):
        t[b + proj + ".bias"] = (0.1 * rng.standard_normal(o).astype(np.float32), "F32")
  # rows that aren't whole 256-element blocks can't be a K format: like llama-quantize, use a 32-element format instead
  t = {n: (a, FALLBACK.get(q, q) if q in FALLBACK and a.shape[-1] % 256 else q) for n, (a, q) in t.items()}
  gguf_write(path, kv, t)
  return kv
