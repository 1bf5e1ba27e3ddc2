"""python -m tinycore.llm --model PATH.gguf [--prompt ...] [--benchmark] [--serve]"""
from __future__ import annotations
import argparse, os, resource, sys, time
import numpy as np

def rss_mib() -> float: return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux reports KiB

def benchmark(llm, n_prompt: int, n_decode: int, warmup: bool) -> dict:
  from tinycore.helpers import GlobalCounters
  rng = np.random.default_rng(0)
  prompt = rng.integers(0, llm.cfg.vocab, n_prompt).tolist()
  n_decode = min(n_decode, llm.max_context - n_prompt - 1)
  if warmup: list(llm.generate(prompt, 4))   # compile and capture both jits before timing
  llm.prefill(prompt)   # the jits capture on their 2nd call: make sure that happened outside the timing
  st: dict = {}
  t0 = time.perf_counter(); llm.prefill(prompt); pre = time.perf_counter() - t0
  pos, tok, times = n_prompt, int(prompt[-1]), []
  for _ in range(n_decode):
    t = time.perf_counter(); llm.decode(tok, pos); times.append(time.perf_counter() - t); pos += 1
  dec = times[2:] if len(times) > 4 else times   # the first decode calls run plain / capture
  cache = sum(c.nbytes() if hasattr(c, "nbytes") else c.numel() * 4 for kv in llm.model.cache for c in kv)
  st.update(prefill_tok_s=n_prompt / pre, decode_tok_s=len(dec) / sum(dec), decode_ms=1000 * float(np.median(dec)), weights_mib=llm.weight_bytes / 2**20,
            kv_cache_mib=cache / 2**20, rss_mib=rss_mib(), mem_used_mib=GlobalCounters.mem_used / 2**20)
  return st

def main(argv=None):
  ap = argparse.ArgumentParser(prog="python -m tinycore.llm", description="run a llama-family GGUF model")
  ap.add_argument("--model", "-m", required=True, help="path to a .gguf file")
  ap.add_argument("--prompt", default="Hello", help="user message (chat template applied) or raw text with --raw")
  ap.add_argument("--raw", action="store_true", help="don't apply the chat template")
  ap.add_argument("--max-tokens", type=int, default=64)
  ap.add_argument("--temperature", type=float, default=0.0)
  ap.add_argument("--top-k", type=int, default=0)
  ap.add_argument("--seed", type=int, default=None)
  ap.add_argument("--max-context", type=int, default=512)
  ap.add_argument("--chunk", type=int, default=32, help="prefill chunk size (tokens per jitted prefill call)")
  ap.add_argument("--benchmark", action="store_true", help="print prefill and decode tokens/s and memory use")
  ap.add_argument("--warmup", action="store_true", help="run a short generation before timing")
  ap.add_argument("--serve", action="store_true", help="serve /v1/chat/completions on localhost")
  ap.add_argument("--port", type=int, default=8000)
  a = ap.parse_args(argv)
  if not os.path.exists(a.model): ap.error(f"no such model file: {a.model}")
  from tinycore.llm.generate import LLM
  from tinycore import Device
  t = time.perf_counter()
  llm = LLM(a.model, a.max_context, a.chunk)
  c = llm.cfg
  print(f"loaded {a.model}: {c.arch}, {c.n_layers} layers, dim {c.dim}, heads {c.n_heads}/{c.n_kv_heads}, vocab {c.vocab}, "
        f"{llm.weight_bytes / 2**20:.1f} MiB of weights, on {Device.DEFAULT} in {time.perf_counter() - t:.2f}s", file=sys.stderr)
  if a.benchmark:
    n_prompt = min(max(a.chunk, 32), llm.max_context // 2)
    st = benchmark(llm, n_prompt, a.max_tokens, a.warmup)
    print(f"prefill: {st['prefill_tok_s']:.1f} tok/s ({n_prompt} tokens)\ndecode:  {st['decode_tok_s']:.1f} tok/s ({st['decode_ms']:.2f} ms/token)\n"
          f"memory:  weights {st['weights_mib']:.2f} MiB, kv cache {st['kv_cache_mib']:.2f} MiB, device buffers {st['mem_used_mib']:.2f} MiB, peak RSS {st['rss_mib']:.0f} MiB")
    return 0
  if a.serve:
    from tinycore.llm.serve import make_server
    srv = make_server(llm, port=a.port, name=os.path.basename(a.model))
    print(f"serving http://127.0.0.1:{srv.server_address[1]}/v1/chat/completions", file=sys.stderr)
    try: srv.serve_forever()
    except KeyboardInterrupt: pass
    return 0
  toks = llm.tok.encode(a.prompt) if a.raw else llm.chat_tokens([{"role": "user", "content": a.prompt}])
  if a.warmup: list(llm.generate(toks, 2))
  st: dict = {}
  out, shown = [], ""
  for t in llm.generate(toks, a.max_tokens, a.temperature, a.top_k, a.seed, stats=st):
    if t in llm.tok.stop: break
    out.append(t)
    if not (s := llm.tok.decode(out)).endswith("\ufffd"): print(s[len(shown):], end="", flush=True); shown = s
  print()
  if st.get("decode_s"): print(f"prefill {st['prefill_tokens']} tokens in {st['prefill_s']:.2f}s, decode {st['decode_tokens'] / st['decode_s']:.1f} tok/s", file=sys.stderr)
  return 0

if __name__ == "__main__": sys.exit(main())
