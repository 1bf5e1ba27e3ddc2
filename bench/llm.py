"""LLM benchmark: a SmolLM2-135M-shaped llama (random weights, built by tinycore.llm.testmodel; no real model can be
downloaded here) in each GGUF weight format, run by tinycore's LLM runner, next to torch float32 (transformers'
LlamaForCausalLM of the same shape) at its best thread count.

  .venv/bin/python bench/llm.py                        # every format, SmolLM2-135M shape (minutes on 2 cores)
  .venv/bin/python bench/llm.py --kinds Q4_0,Q4_K      # some formats
  .venv/bin/python bench/llm.py --quick                # a tiny model: the smoke test (CI runs it, no timing asserted)
  .venv/bin/python bench/llm.py --json out.json

Per format: file size, time to first token of a fresh process with an empty kernel cache (cold) and with the cache the
cold run left (warm), prefill tok/s, steady-state decode tok/s (after warmup, jitted), peak RSS, and decode as a
fraction of the memory-bandwidth bound: the weight bytes one token reads, at the read bandwidth measured here. A second
table gives the steady run's RSS after each phase (interpreter, imports, device open, model loaded, first token,
decoded): the first four are a floor that no model size changes."""
from __future__ import annotations

# only what a child process needs at the top: it measures its own RSS from the start, and argparse, subprocess and
# tempfile (~3 MiB before tinycore imports) are the parent's; the child parses its fixed arguments by hand (child_main)
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KINDS = ["F32", "F16", "Q8_0", "Q6_K", "Q5_K", "Q5_1", "Q5_0", "Q4_K", "Q4_1", "Q4_0", "Q3_K", "Q2_K"]
# SmolLM2-135M: dim 576, 30 layers, 9 heads / 3 kv heads, ffn 1536, vocab 49152, tied embeddings
SHAPES: dict[str, dict] = {
          "smollm2-135m": {"dim": 576, "n_layers": 30, "n_heads": 9, "n_kv_heads": 3, "hidden": 1536, "vocab_size": 49152, "tied": True},
          # the next size up: where the ~42 MiB runtime floor (interpreter, numpy, plugin discovery) stops dominating peak RSS
          "smollm2-360m": {"dim": 960, "n_layers": 32, "n_heads": 15, "n_kv_heads": 5, "hidden": 2560, "vocab_size": 49152, "tied": True},
          # every row whole 256-element blocks, so the K formats are used for every tensor (at 576, most fall back to Q5_0/Q5_1/Q8_0/Q4_0)
          "d768": {"dim": 768, "n_layers": 12, "n_heads": 12, "n_kv_heads": 4, "hidden": 2048, "vocab_size": 32000, "tied": True},
          "quick": {"dim": 256, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "hidden": 512, "vocab_size": 1024, "tied": True}}

def peak_rss_mib() -> float:
  """This process's peak RSS. VmHWM where Linux has it: ru_maxrss of a child also counts the parent's pages it held
  between fork and exec (the parent here holds the float weights it just quantized)."""
  try:
    with open("/proc/self/status") as f: return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
  except (OSError, StopIteration):
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # KiB on Linux

# ---- children: one fresh process per measurement, so RSS and the kernel cache are its own
def rss_now_mib() -> float:
  try:
    with open("/proc/self/status") as f: return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:")) / 1024
  except (OSError, StopIteration): return 0.0

def child_tinycore(path: str, n_prompt: int, n_decode: int, steady: bool) -> dict:
  phases = {"interpreter": rss_now_mib()}   # VmRSS after each phase: where the peak's MiB sit
  import numpy  # noqa: F401  (its RSS is a phase of its own)
  phases["import numpy"] = rss_now_mib()
  from tinycore.llm.generate import LLM, random_tokens
  from tinycore.tensor import Tensor
  from tinycore.helpers import GlobalCounters
  phases["import tinycore.llm"] = rss_now_mib()
  Tensor.zeros(1).contiguous().realize()   # the device opened: what any run costs before the model (interpreter, imports)
  baseline = phases["device open"] = rss_now_mib()
  llm = LLM(path, max_context=n_prompt + n_decode + 8, chunk=min(32, n_prompt))
  phases["model loaded"] = rss_now_mib()
  prompt = random_tokens(n_prompt, llm.cfg.vocab)
  next(llm.generate(prompt, 1))
  phases["first token"] = rss_now_mib()
  out: dict = {"first_token_at": time.time(), "rss_phases_mib": phases}
  if steady:
    from tinycore.llm.benchmark import benchmark
    st = benchmark(llm, n_prompt, n_decode, warmup=True)
    out.update(prefill_tok_s=st["prefill_tok_s"], decode_tok_s=st["decode_tok_s"], decode_ms=st["decode_ms"])
    GlobalCounters.reset()
    llm.decode(int(prompt[-1]), n_prompt)   # a replayed step: the kernels it launches
    out["kernels_per_step"] = GlobalCounters.kernel_count
  # bytes one decode step reads: every matmul weight (the embedding is read one row per token, unless it is the output)
  w = llm.model.w
  out["bytes_per_token"] = sum(q.nbytes for n, q in w.items() if len(q.shape) == 2 and (n != "token_embd.weight" or llm.model.out_name == n))
  out["weight_bytes"] = llm.weight_bytes
  if steady: phases["decoded"] = rss_now_mib()
  out["rss_mib"] = peak_rss_mib()
  out["baseline_rss_mib"] = baseline
  out["kv_cache_mib"] = sum(c.numel() * c.dtype.itemsize for c in llm.model.cache) / 2**20
  return out

def child_torch(shape: dict, n_prompt: int, n_decode: int) -> dict:
  import torch
  from transformers import LlamaConfig, LlamaForCausalLM
  cfg = LlamaConfig(hidden_size=shape["dim"], num_hidden_layers=shape["n_layers"], num_attention_heads=shape["n_heads"],
                    num_key_value_heads=shape["n_kv_heads"], intermediate_size=shape["hidden"], vocab_size=shape["vocab_size"],
                    tie_word_embeddings=shape["tied"], max_position_embeddings=n_prompt + n_decode + 8)
  torch.manual_seed(0)
  model = LlamaForCausalLM(cfg).eval()
  ids = torch.randint(0, shape["vocab_size"], (1, n_prompt))
  best: dict = {}
  for threads in sorted({1, os.cpu_count() or 1}):
    torch.set_num_threads(threads)
    with torch.inference_mode():
      for _ in range(2): model(ids, use_cache=True)   # warm up
      t = time.perf_counter(); out = model(ids, use_cache=True); pre = time.perf_counter() - t
      past, tok, times = out.past_key_values, out.logits[:, -1:].argmax(-1), []
      for _ in range(n_decode):
        t = time.perf_counter(); o = model(tok, past_key_values=past, use_cache=True); times.append(time.perf_counter() - t)
        past, tok = o.past_key_values, o.logits[:, -1:].argmax(-1)
    dec = times[2:] if len(times) > 4 else times
    r = {"threads": threads, "prefill_tok_s": n_prompt / pre, "decode_tok_s": len(dec) / sum(dec)}
    if r["decode_tok_s"] > best.get("decode_tok_s", 0): best = r
    best[f"prefill_tok_s_{threads}t"], best[f"decode_tok_s_{threads}t"] = r["prefill_tok_s"], r["decode_tok_s"]
  best["prefill_tok_s"] = max(v for k, v in best.items() if k.startswith("prefill_tok_s_"))
  best["rss_mib"] = peak_rss_mib()
  best["weight_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
  return best

def read_bandwidth_gbs() -> float:
  """Read bandwidth of this machine: the best of a few sums over 256 MiB (numpy, one thread; torch, every thread)."""
  import numpy as np
  a = np.ones(64 << 20, np.float32)
  best = 0.0
  for _ in range(3):
    t = time.perf_counter(); a.sum(); best = max(best, a.nbytes / (time.perf_counter() - t))
  try:
    import torch
    ta = torch.from_numpy(a)
    for _ in range(3):
      t = time.perf_counter(); ta.sum(); best = max(best, a.nbytes / (time.perf_counter() - t))
  except ImportError: pass
  return best / 1e9

def _run_child(args: list[str], env: dict, timeout: float) -> dict:
  import subprocess
  t0 = time.time()
  # this file imported as a module, not run as the script: a script is compiled afresh in the child (its parse and
  # compile leave ~1 MiB of the interpreter's pools behind in the RSS being measured), a module's bytecode is cached
  boot = f"import sys; sys.path.insert(0, {HERE!r}); from llm import child_main; sys.exit(child_main(sys.argv[1:]))"
  p = subprocess.run([sys.executable, "-c", boot, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False)
  if p.returncode != 0: return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
  r = json.loads(p.stdout.strip().splitlines()[-1])
  if "first_token_at" in r: r["ttft_s"] = r.pop("first_token_at") - t0   # process start (interpreter, imports, load) to the first token
  return r

def child_main(argv: list[str]) -> int:
  """A child: `--child KIND PATH [--steady] [--shape S] [--prompt N] [--decode N]`, as _run_child passes them."""
  kind, path = argv[argv.index("--child") + 1:argv.index("--child") + 3]
  opt = lambda name, default: argv[argv.index(name) + 1] if name in argv else default
  shape, n_prompt, n_decode = opt("--shape", "smollm2-135m"), int(opt("--prompt", 64)), int(opt("--decode", 32))
  r = child_torch(SHAPES[shape], n_prompt, n_decode) if kind == "torch" else child_tinycore(path, n_prompt, n_decode, "--steady" in argv)
  print(json.dumps(r))
  return 0

def main(argv=None) -> int:
  import argparse, tempfile
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                               epilog=__doc__.split("\n\n", 1)[1])
  ap.add_argument("--kinds", default=",".join(KINDS), help="weight formats to run, comma-separated (default: all)")
  ap.add_argument("--shape", choices=list(SHAPES), default="smollm2-135m", help="model shape (default: smollm2-135m)")
  ap.add_argument("--quick", action="store_true", help="the tiny shape, few tokens, F32/Q8_0/Q4_K only unless --kinds says otherwise")
  ap.add_argument("--prompt", type=int, default=64, help="prompt tokens (default: 64)")
  ap.add_argument("--decode", type=int, default=32, help="decode steps timed (default: 32)")
  ap.add_argument("--no-torch", action="store_true", help="skip the torch float32 column")
  ap.add_argument("--json", help="also write every result to this file")
  ap.add_argument("--timeout", type=float, default=1800, help="seconds per child process (default: 1800)")
  ap.add_argument("--child", nargs=2, metavar=("KIND", "PATH"), help=argparse.SUPPRESS)
  ap.add_argument("--steady", action="store_true", help=argparse.SUPPRESS)
  a = ap.parse_args(argv)
  if a.quick:
    a.shape, a.prompt, a.decode = "quick", min(a.prompt, 16), min(a.decode, 8)
    if a.kinds == ",".join(KINDS): a.kinds = "F32,Q8_0,Q4_K"
  if a.child: return child_main(["--child", *a.child, "--shape", a.shape, "--prompt", str(a.prompt), "--decode", str(a.decode)]
                                 + (["--steady"] if a.steady else []))
  kinds = [k for k in a.kinds.split(",") if k]
  if bad := [k for k in kinds if k not in KINDS]: ap.error(f"--kinds: unknown format {', '.join(bad)}; formats: {', '.join(KINDS)}")
  sys.path.insert(0, os.path.join(HERE, "..", "core"))
  from tinycore.llm.testmodel import tiny_llama
  bw = read_bandwidth_gbs()
  print(f"shape {a.shape}, prompt {a.prompt} tokens, {a.decode} decode steps; read bandwidth {bw:.1f} GB/s; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", file=sys.stderr)
  results: dict = {"shape": a.shape, "read_bandwidth_gbs": bw, "rows": {}}
  base = ["--shape", a.shape, "--prompt", str(a.prompt), "--decode", str(a.decode)]
  with tempfile.TemporaryDirectory() as d:
    for kind in kinds:
      path = os.path.join(d, f"{kind}.gguf")
      tiny_llama(path, qtype=kind, seed=0, ctx=4096, **SHAPES[a.shape])
      env = dict(os.environ, CACHEDB=os.path.join(d, f"cache-{kind}"))
      cold = _run_child(["--child", kind, path, *base], env, a.timeout)
      warm = _run_child(["--child", kind, path, "--steady", *base], env, a.timeout)
      r = {"file_mib": os.path.getsize(path) / 2**20, "ttft_cold_s": cold.get("ttft_s"), **{k: v for k, v in warm.items() if k != "ttft_s"},
           "ttft_warm_s": warm.get("ttft_s"), "error": cold.get("error") or warm.get("error")}
      if r.get("decode_tok_s") and r.get("bytes_per_token"): r["bound_fraction"] = r["decode_tok_s"] * r["bytes_per_token"] / (bw * 1e9)
      results["rows"][kind] = r
      os.remove(path)
      print(f"  {kind}: done", file=sys.stderr)
    if not a.no_torch:
      try:
        import importlib.util
        ok = importlib.util.find_spec("torch") is not None and importlib.util.find_spec("transformers") is not None
      except (ImportError, ValueError): ok = False
      results["torch"] = (_run_child(["--child", "torch", "-", *base], dict(os.environ), a.timeout) if ok
                          else {"skipped": "torch or transformers is not installed"})
  print(report(results))
  if a.json:
    with open(a.json, "w") as f: json.dump(results, f, indent=1)
  return 1 if any(r.get("error") for r in results["rows"].values()) else 0

def report(res: dict) -> str:
  f = lambda v, fmt: "-" if v is None else format(v, fmt)
  lines = ["| weights | file MiB | TTFT cold s | TTFT warm s | prefill tok/s | decode tok/s | ms/token | peak RSS MiB | bytes/token MiB "
           "| % of bw bound | kernels/step | RSS baseline MiB | peak RSS / (file + KV) | above baseline / (file + KV) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for k, r in res["rows"].items():
    if r.get("error"): lines.append(f"| {k} | {f(r.get('file_mib'), '.1f')} | ERROR: {r['error']} |"); continue
    held = r["file_mib"] + r["kv_cache_mib"] if "kv_cache_mib" in r else None   # what the model must hold: the RSS target's unit
    lines.append(f"| {k} | {r['file_mib']:.1f} | {f(r.get('ttft_cold_s'), '.2f')} | {f(r.get('ttft_warm_s'), '.2f')} | "
                 f"{f(r.get('prefill_tok_s'), '.1f')} | "
                 f"{f(r.get('decode_tok_s'), '.1f')} | {f(r.get('decode_ms'), '.1f')} | {r['rss_mib']:.1f} | {r['bytes_per_token'] / 2**20:.1f} | "
                 f"{f(100 * r['bound_fraction'] if 'bound_fraction' in r else None, '.1f')} | {f(r.get('kernels_per_step'), 'd')} | "
                 f"{f(r.get('baseline_rss_mib'), '.0f')} | {f(r['rss_mib'] / held if held else None, '.3f')} | "
                 f"{f((r['rss_mib'] - r['baseline_rss_mib']) / held if held else None, '.2f')} |")
  t = res.get("torch")
  if t and "decode_tok_s" in t:
    frac = t["decode_tok_s"] * t["weight_bytes"] / (res["read_bandwidth_gbs"] * 1e9)
    lines.append(f"| torch float32 ({t['threads']} thread{'s' if t['threads'] > 1 else ''}) | - | - | - | {t['prefill_tok_s']:.1f} | "
                 f"{t['decode_tok_s']:.1f} | "
                 f"{1000 / t['decode_tok_s']:.1f} | {t['rss_mib']:.0f} | {t['weight_bytes'] / 2**20:.1f} | {100 * frac:.1f} |")
  elif t: lines.append(f"| torch float32 | {t.get('skipped') or 'ERROR: ' + str(t.get('error'))} |")
  # the steady run's RSS after each phase: the interpreter and imports are a floor no model size changes
  rows = {k: r["rss_phases_mib"] for k, r in res["rows"].items() if r.get("rss_phases_mib")}
  if rows:
    names = list(next(iter(rows.values())))
    lines += ["", "| RSS MiB after | " + " | ".join(names) + " | peak |", "|---" * (len(names) + 2) + "|"]
    lines += [f"| {k} | " + " | ".join(f"{ph.get(n, 0):.1f}" for n in names) + f" | {res['rows'][k]['rss_mib']:.1f} |" for k, ph in rows.items()]
  return "\n".join(lines)

if __name__ == "__main__": sys.exit(child_main(sys.argv[1:]) if "--child" in sys.argv else main())
