"""Prefill in fixed-size chunks and one-token decode, each a TinyJit over a bound position Variable (so every chunk
and every decode step replays the same kernels), and sampling on the host (greedy, or temperature + top-k with a seed)."""
from __future__ import annotations
import ctypes, math, os, random, time
from typing import Iterator
import numpy as np
from tinycore.uop import Variable
from tinycore.tensor import Tensor
from tinycore.device import Device
from tinycore.engine.jit import TinyJit
from tinycore.llm.weights import load_gguf_raw
from tinycore.llm.model import Config, Transformer
from tinycore.llm.tokenizer import Tokenizer
from tinycore.llm.chat import apply_chat_template

def _trim_heap() -> None:
  """Hand the C heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing). After a big free (the
  metadata's vocabulary lists, the intermediates of a capture) glibc keeps them: its mmap threshold grows with every
  large block freed, so later large blocks come from the heap, which only shrinks from the top. ~2 MiB at load."""
  try: trim = ctypes.CDLL(None).malloc_trim
  except (OSError, AttributeError): return
  trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
  trim(0)

def random_tokens(n: int, vocab: int, seed: int = 0) -> list[int]:
  """n token ids drawn uniformly from [0, vocab) (benchmark prompts), by the stdlib's generator: numpy.random would
  import hashlib and with it OpenSSL, whose ~3.4 MiB of resident pages the RSS measured next to them would count."""
  r = random.Random(seed)
  return [r.randrange(vocab) for _ in range(n)]

class LLM:
  def __init__(self, path: str, max_context: int = 512, chunk: int = 32, int8_activations: bool | None = None):
    # a chunk below 1 made the prefill loop's range empty: generation ran without the prompt in the cache
    if not (isinstance(chunk, int) and chunk >= 1): raise ValueError(f"prefill chunk must be an integer >= 1, got {chunk!r}")
    if not (isinstance(max_context, int) and max_context >= 2): raise ValueError(f"max_context must be an integer >= 2, got {max_context!r}")
    if os.path.isdir(path):   # a Hugging Face checkpoint directory
      from tinycore.llm.hf import load_hf_dir
      self.kv, w, self.cfg = load_hf_dir(path)
    else:
      self.kv, w = load_gguf_raw(path)
      self.cfg = Config.from_gguf(self.kv, w)
    # int8 activations for block-quantized matmuls where the device has kernels for them (llm/quant_linear.py); LLM_INT8=0: float
    if int8_activations is None: int8_activations = os.environ.get("LLM_INT8", "1") != "0"
    # the tokenizer first, and its compact tables replace the metadata's lists (~9 MiB of Python objects for a 49k
    # vocabulary) before the weights are copied in: the lists are freed below the peak, not held next to it
    self.tok = Tokenizer(self.kv)
    self.kv = {**self.kv, "tokenizer.ggml.tokens": self.tok.tokens, "tokenizer.ggml.token_type": self.tok.types,
               "tokenizer.ggml.scores": self.tok.scores}
    _trim_heap()
    self.model = Transformer(self.cfg, w, max_context, int8_activations=int8_activations)
    self.max_context, self.chunk = self.model.max_context, min(chunk, self.model.max_context)
    self.weight_bytes = sum(q.nbytes for q in w.values())
    self.v_dec = Variable("pos", 0, self.max_context - 1)
    self.v_pre = Variable("start_pos", 0, self.max_context - self.chunk)
    # captured on their first call: the weights are realized above, so a plain first run would only build, schedule
    # and run the whole graph once more before the capture (about half the time to the first token)
    # the head's (1, 1, vocab) output as it is: reading it needs no copy (a [:, -1] view of it was a copy kernel per step)
    self._decode = TinyJit(lambda x, pos: self.model(x, pos), capture_first=True)
    # prefill stops before the output matmul: only the prompt's last token needs logits (the head is the biggest matmul)
    self._prefill = TinyJit(lambda x, pos: self.model(x, pos, head=False), capture_first=True)
    self._settled: list[TinyJit] = []

  def prefill(self, toks: list[int], start: int = 0) -> np.ndarray:
    """Run `toks` at positions start.. in chunks (the last one padded: its extra cache rows are rewritten before any
    read); the logits of the last token."""
    if start + len(toks) > self.max_context: raise ValueError(f"{start + len(toks)} tokens don't fit the context of {self.max_context}")
    last = hidden = None
    for s in range(0, len(toks), self.chunk):
      part = toks[s:s + self.chunk]
      p = start + s
      if p > self.max_context - self.chunk:   # too near the end for a full chunk: token by token
        for j, t in enumerate(part): last, hidden = self.decode(t, p + j), None
        continue
      x = self.model.embed(part + [0] * (self.chunk - len(part)))
      hidden, last = self._prefill(x, self.v_pre.bind(p)).numpy()[0, len(part) - 1], None
      self._settle(self._prefill)
    if hidden is not None: last = self.model.head(Tensor(hidden.reshape(1, 1, -1))).numpy()[0, 0]
    return last

  def decode(self, tok: int, pos: int) -> np.ndarray:
    out = self._decode(self.model.embed([tok]), self.v_dec.bind(pos)).numpy()[0, 0]
    self._settle(self._decode)
    return out

  def _settle(self, jit: TinyJit) -> None:
    """After a jit's first call (its capture): hand the blocks the allocator keeps for reuse back to the system. The
    captured kernels share planned memory from then on, so the intermediates freed while capturing (~15 MiB for a 135M
    model) would sit in the cache for good. Once per jit: under JIT=0 every call runs plain and reuses that cache."""
    if jit in self._settled: return
    self._settled.append(jit)
    dev = self.model.inv_freq.device
    for d in (dev,) if isinstance(dev, str) else dev:
      if callable(free := getattr(Device[d].allocator, "free_cache", None)): free()
    _trim_heap()

  def forward_all(self, toks: list[int]) -> np.ndarray:
    """Logits of every position in one plain (un-jitted) pass from position 0, for checks."""
    return self.model(self.model.embed(toks), 0).numpy()[0]

  @staticmethod
  def sample(logits: np.ndarray, temperature: float, top_k: int, rng: np.random.Generator | None, top_p: float = 1.0) -> int:
    if temperature <= 0 or rng is None: return int(np.argmax(logits))
    z = logits.astype(np.float64) / temperature
    if 0 < top_k < len(z): z[z < np.partition(z, -top_k)[-top_k]] = -np.inf
    p = np.exp(z - z.max()); p /= p.sum()
    if top_p < 1.0:   # nucleus: the most likely tokens whose probabilities add up to top_p (at least one)
      order = np.argsort(-p, kind="stable")
      keep = order[:int(np.searchsorted(np.cumsum(p[order]), top_p)) + 1]
      q = np.zeros_like(p); q[keep] = p[keep]; p = q / q.sum()
    return int(rng.choice(len(p), p=p))

  def check_sampling(self, max_tokens: int, temperature: float, top_k: int, top_p: float, seed: int | None):
    """ValueError naming the first argument out of range (NaN temperature made every probability NaN deep in numpy)."""
    isint = lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, bool)
    if not (isint(max_tokens) and max_tokens >= 0): raise ValueError(f"max_tokens must be an integer >= 0, got {max_tokens!r}")
    if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
      raise ValueError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if not (isint(top_k) and top_k >= 0): raise ValueError(f"top_k must be an integer >= 0, got {top_k!r}")
    if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1): raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    if seed is not None and not (isint(seed) and 0 <= seed < 2**63): raise ValueError(f"seed must be an integer in [0, 2**63), got {seed!r}")

  def check_prompt(self, toks: list[int]):
    if len(toks) == 0: raise ValueError("the prompt is empty (no tokens)")
    if len(toks) > self.max_context: raise ValueError(f"the prompt is {len(toks)} tokens, longer than the context of {self.max_context}")
    bad = next((t for t in toks if not (isinstance(t, (int, np.integer)) and 0 <= t < self.cfg.vocab)), None)
    if bad is not None: raise ValueError(f"token id {bad!r} is not in the vocabulary of {self.cfg.vocab}")

  def generate(self, toks: list[int], max_tokens: int, temperature: float = 0.0, top_k: int = 0, seed: int | None = None,
               stats: dict | None = None, top_p: float = 1.0) -> Iterator[int]:
    """Yield up to max_tokens new token ids, stopping at an end-of-turn token or the end of the context. Bad arguments
    raise ValueError on the first next()."""
    self.check_sampling(max_tokens, temperature, top_k, top_p, seed)
    self.check_prompt(toks)
    # made only to sample: numpy.random imports hashlib, which maps OpenSSL (~3.4 MiB resident) for greedy runs too
    rng = np.random.default_rng(seed) if temperature > 0 else None
    t0 = time.perf_counter()
    logits = self.prefill(toks)
    t1 = time.perf_counter()
    if stats is not None: stats.update(prefill_tokens=len(toks), prefill_s=t1 - t0, decode_tokens=0, decode_s=0.0)
    pos = len(toks)
    for _ in range(max_tokens):
      nxt = self.sample(logits, temperature, top_k, rng, top_p)
      yield nxt
      if nxt in self.tok.stop or pos >= self.max_context: break
      t = time.perf_counter()
      logits = self.decode(nxt, pos)
      pos += 1
      if stats is not None: stats["decode_tokens"] += 1; stats["decode_s"] += time.perf_counter() - t

  def chat_tokens(self, messages: list[dict]) -> list[int]:
    bos = self.tok.tokens[self.tok.bos] if self.tok.bos is not None else ""
    eos = self.tok.tokens[self.tok.eos] if self.tok.eos is not None else ""
    markers = " ".join(self.tok.special_pieces)   # picks a format if the model has no template
    text = apply_chat_template(self.kv.get("tokenizer.chat_template"), messages, bos, eos, markers=markers)
    return self.tok.encode(text, add_bos=False if bos and text.startswith(bos) else None)
