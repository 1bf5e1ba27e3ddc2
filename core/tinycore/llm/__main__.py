"""python -m tinycore.llm --model PATH.gguf|HF_DIR [--prompt ...] [--benchmark] [--serve]"""
from __future__ import annotations
import argparse, math, os, sys, time
from tinycore.llm.tokenizer import TextStream
from tinycore.llm.benchmark import benchmark

def _ranged(kind, lo=None, hi=None, finite=False):
  """An argparse type: `kind` within [lo, hi]; a bad value is a usage error naming the limit, not a traceback later."""
  def parse(text: str):
    try: v = kind(text)
    except ValueError: raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if finite and not math.isfinite(v): raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
      raise argparse.ArgumentTypeError(f"{text} is out of range ({'>= ' + str(lo) if hi is None else f'{lo}..{hi}'})")
    return v
  return parse

class _Help(argparse.RawDescriptionHelpFormatter):
  """Each option's default in its help, where it has one worth showing (not the None/False of an unset flag)."""
  def _get_help_string(self, action: argparse.Action) -> str:
    text = action.help or ""
    shown = not any(action.default is v for v in (None, False, argparse.SUPPRESS))   # `is`: 0 and 0.0 are real defaults
    if shown and "%(default)" not in text: text += " (default: %(default)s)"
    return text

def main(argv=None):
  ap = argparse.ArgumentParser(prog="python -m tinycore.llm", formatter_class=_Help,
    description="Run a llama-family language model (llama 2/3, mistral, qwen2/3, gemma 1/2/3, phi-3): chat, complete raw text, "
                "benchmark, or serve an OpenAI-compatible API.",
    epilog="examples:\n"
           "  python -m tinycore.llm -m SmolLM2-135M-Instruct-Q4_1.gguf --prompt 'What is 2+2?'\n"
           "  python -m tinycore.llm -m ./Qwen3-0.6B --raw --prompt 'def fib(n):' --max-tokens 64\n"
           "  python -m tinycore.llm -m model.gguf --benchmark --warmup --max-tokens 128\n"
           "  python -m tinycore.llm -m model.gguf --serve --port 8080\n"
           "The device is chosen with DEV (e.g. DEV=CPU); DEBUG=2 shows the kernels.\n"
           "Exit status: 0 success, 1 an error (one line; --debug or DEBUG=1 shows the traceback), 2 a bad option.")
  ap.add_argument("--model", "-m", required=True, metavar="PATH", default=argparse.SUPPRESS,
                  help="a .gguf file, or a Hugging Face checkpoint directory (config.json, tokenizer.json, *.safetensors)")
  ap.add_argument("--prompt", default="Hello", help="the user message (the model's chat template is applied), or raw text with --raw")
  ap.add_argument("--raw", action="store_true", help="tokenize --prompt as is, without the chat template")
  ap.add_argument("--max-tokens", type=_ranged(int, 0), default=64, help="tokens to generate at most (the number of decode steps with --benchmark)")
  ap.add_argument("--temperature", type=_ranged(float, 0, finite=True), default=0.0,
                  help="sampling temperature; 0 picks the most likely token (greedy)")
  ap.add_argument("--top-k", type=_ranged(int, 0), default=0, help="sample among the k most likely tokens only; 0: no limit")
  ap.add_argument("--top-p", type=_ranged(float, 1e-9, 1.0), default=1.0,
                  help="nucleus sampling: the most likely tokens whose probabilities add up to p")
  ap.add_argument("--seed", type=_ranged(int, 0, 2**63 - 1), default=None, help="random seed for sampling (repeatable output); none: a fresh one")
  ap.add_argument("--max-context", type=_ranged(int, 2), default=512,
                  help="tokens of context (prompt + reply), the KV cache's size; at most the model's own")
  ap.add_argument("--debug", action="store_true", help="on an error, show the full traceback (so does DEBUG=1)")
  ap.add_argument("--chunk", type=_ranged(int, 1), default=32, help="prefill chunk size (tokens per jitted prefill call)")
  ap.add_argument("--float-activations", action="store_true",
                  help="keep activations float32 in quantized matmuls (default: int8 per 32 values where the device has kernels "
                       "for it, as llama.cpp does; LLM_INT8=0 does the same)")
  ap.add_argument("--benchmark", action="store_true", help="print prefill and decode tokens/s and memory use on a random prompt")
  ap.add_argument("--warmup", action="store_true", help="run a short generation first, so compiling kernels is not timed")
  ap.add_argument("--serve", action="store_true", help="serve /v1/chat/completions (on 127.0.0.1 unless --host says otherwise)")
  ap.add_argument("--host", default="127.0.0.1", help="address to serve on")
  ap.add_argument("--port", type=_ranged(int, 0, 65535), default=8000, help="TCP port to serve on (0: any free port)")
  ap.add_argument("--max-body", type=_ranged(int, 1024), default=1 << 20, help="largest request body in bytes (413 beyond)")
  ap.add_argument("--max-waiting", type=_ranged(int, 0), default=64, help="requests that may wait for the model (503 beyond)")
  ap.add_argument("--request-timeout", type=_ranged(float, 0.1, 3600, finite=True), default=10.0,
                  help="seconds for a request's headers and body to arrive")
  a = ap.parse_args(argv)
  if not (os.path.isfile(a.model) or os.path.isdir(a.model)): ap.error(f"no such model file or checkpoint directory: {a.model}")
  from tinycore.llm.generate import LLM
  from tinycore import Device
  from tinycore.errors import DevSpecError, EnvError, TinycoreError
  t = time.perf_counter()
  try: llm = LLM(a.model, a.max_context, a.chunk, int8_activations=False if a.float_activations else None)
  except (TinycoreError, DevSpecError, EnvError): raise   # the device or the environment, not the file: run() reports it
  except (ValueError, OSError) as e:   # a broken or hostile file: one line, not a traceback
    print(f"error: can't load {a.model}: {e}", file=sys.stderr)
    return 1
  c = llm.cfg
  print(f"loaded {a.model}: {c.arch}, {c.n_layers} layers, dim {c.dim}, heads {c.n_heads}/{c.n_kv_heads}, vocab {c.vocab}, "
        f"{llm.weight_bytes / 2**20:.1f} MiB of weights, on {Device.DEFAULT} in {time.perf_counter() - t:.2f}s", file=sys.stderr)
  if a.benchmark:
    n_prompt = min(max(a.chunk, 32), llm.max_context // 2)
    st = benchmark(llm, n_prompt, a.max_tokens, a.warmup)
    print(f"first token: {st['first_token_s']:.2f} s after loading ({n_prompt}-token prompt, compiling or loading its kernels)\n"
          f"prefill: {st['prefill_tok_s']:.1f} tok/s ({n_prompt} tokens, steady state)\n"
          f"decode:  {st['decode_tok_s']:.1f} tok/s ({st['decode_ms']:.2f} ms/token, steady state: after warmup, jitted)\n"
          f"memory:  weights {st['weights_mib']:.2f} MiB, kv cache {st['kv_cache_mib']:.2f} MiB, device buffers {st['mem_used_mib']:.2f} MiB, "
          f"peak RSS {st['rss_mib']:.0f} MiB")
    return 0
  if a.serve:
    import logging
    from tinycore.llm.serve import make_server
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
      srv = make_server(llm, a.host, a.port, os.path.basename(a.model), max_body=a.max_body, max_waiting=a.max_waiting,
                        request_timeout=a.request_timeout)
    except OSError as e:
      print(f"error: can't serve on {a.host}:{a.port}: {e.strerror or e}", file=sys.stderr)
      return 1
    print(f"serving http://{a.host}:{srv.server_address[1]}/v1/chat/completions", file=sys.stderr)
    try: srv.serve_forever()
    except KeyboardInterrupt: pass
    finally: srv.server_close()
    return 0
  try: toks = llm.tok.encode(a.prompt) if a.raw else llm.chat_tokens([{"role": "user", "content": a.prompt}])
  except ValueError as e:   # the model's chat template can't render (ChatTemplateError): say so, suggest --raw
    print(f"error: {e} (--raw skips the template)", file=sys.stderr)
    return 1
  try: llm.check_prompt(toks)
  except ValueError as e: ap.error(f"--prompt: {e} (raise --max-context?)")
  if a.warmup: list(llm.generate(toks, 2))
  st: dict = {}
  text = TextStream(llm.tok)
  for t in llm.generate(toks, a.max_tokens, a.temperature, a.top_k, a.seed, stats=st, top_p=a.top_p):
    if t in llm.tok.stop: break
    print(text.add(t), end="", flush=True)
  print(text.flush())
  if st.get("decode_s"):
    print(f"prefill {st['prefill_tokens']} tokens in {st['prefill_s']:.2f}s, decode {st['decode_tokens'] / st['decode_s']:.1f} tok/s",
          file=sys.stderr)
  return 0

def run(argv=None) -> int:
  """main() with errors as one line (cause and fix), the traceback only with --debug or DEBUG>=1."""
  args = sys.argv[1:] if argv is None else argv
  try: return main(argv)
  except KeyboardInterrupt: return 130
  except Exception as e:
    if "--debug" in args or os.environ.get("DEBUG", "").strip() not in ("", "0"): raise
    lines = str(e).strip().splitlines()
    known = any(c.__name__ in ("TinycoreError", "EnvError", "DevSpecError", "CorruptFileError") for c in type(e).__mro__)
    print(f"error: {'' if known else type(e).__name__ + ': '}{lines[0] if lines else type(e).__name__}"
          + ("" if known else " (unexpected: --debug shows where)"), file=sys.stderr)
    return 1

if __name__ == "__main__": sys.exit(run())
