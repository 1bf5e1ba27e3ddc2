"""The steady-state benchmark of a loaded model (`python -m tinycore.llm --benchmark`, bench/llm.py): the first token,
then prefill and decode timed after both jits captured. Its own module, so a process that measures its RSS with it
doesn't also import the command line's argparse and __main__."""
from __future__ import annotations
import resource, time

def rss_mib() -> float: return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux reports KiB

def median(xs: list[float]) -> float:
  """The median, by hand: numpy's imports numpy.ma (~1 MiB), the statistics module decimal and fractions (~0.4 MiB),
  into the process whose RSS the benchmark reports."""
  s, h = sorted(xs), len(xs) // 2
  return s[h] if len(s) % 2 else (s[h - 1] + s[h]) / 2

def benchmark(llm, n_prompt: int, n_decode: int, warmup: bool) -> dict:
  from tinycore.helpers import GlobalCounters
  from tinycore.llm.generate import random_tokens
  prompt = random_tokens(n_prompt, llm.cfg.vocab)
  n_decode = min(n_decode, llm.max_context - n_prompt - 1)
  # the first token of this process: prefill including compiling (or loading from the cache) and capturing its kernels
  t0 = time.perf_counter(); next(llm.generate(prompt, 1)); first = time.perf_counter() - t0
  if warmup: list(llm.generate(prompt, 4))   # compile and capture both jits before timing
  llm.prefill(prompt)   # the jits capture on their 2nd call: make sure that happened outside the timing
  st: dict = {}
  t0 = time.perf_counter(); llm.prefill(prompt); pre = time.perf_counter() - t0
  pos, tok, times = n_prompt, int(prompt[-1]), []
  for _ in range(n_decode):
    t = time.perf_counter(); llm.decode(tok, pos); times.append(time.perf_counter() - t); pos += 1
  dec = times[2:] if len(times) > 4 else times   # the first decode calls run plain / capture
  cache = sum(c.nbytes() if hasattr(c, "nbytes") else c.numel() * 4 for c in llm.model.cache)
  st.update(first_token_s=first, prefill_tok_s=n_prompt / pre, decode_tok_s=len(dec) / sum(dec), decode_ms=1000 * median(dec),
            weights_mib=llm.weight_bytes / 2**20, kv_cache_mib=cache / 2**20, rss_mib=rss_mib(), mem_used_mib=GlobalCounters.mem_used / 2**20)
  return st
