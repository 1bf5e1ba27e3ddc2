"""Write a random llama-architecture GGUF (no download needed) and run the LLM runner's benchmark on it.
  python examples/llm_random_model.py /tmp/m.gguf --dim 512 --layers 8 --hidden 1408 --vocab 8000 --qtype Q8_0 --benchmark"""
import argparse, subprocess, sys
from tinycore.llm.testmodel import tiny_llama

if __name__ == "__main__":
  ap = argparse.ArgumentParser()
  ap.add_argument("path")
  ap.add_argument("--dim", type=int, default=64); ap.add_argument("--layers", type=int, default=2)
  ap.add_argument("--hidden", type=int, default=128); ap.add_argument("--heads", type=int, default=4)
  ap.add_argument("--kv-heads", type=int, default=2); ap.add_argument("--vocab", type=int, default=None)
  ap.add_argument("--qtype", default="F32", choices=["F32", "F16", "Q8_0", "Q4_0"])
  ap.add_argument("--benchmark", action="store_true", help="then run python -m tinycore.llm --benchmark on it")
  a = ap.parse_args()
  tiny_llama(a.path, dim=a.dim, n_layers=a.layers, n_heads=a.heads, n_kv_heads=a.kv_heads, hidden=a.hidden, qtype=a.qtype,
             vocab_size=a.vocab, ctx=2048)
  n = a.layers * (a.dim * a.dim * (2 + 2 * a.kv_heads / a.heads) + 3 * a.dim * a.hidden) + 2 * (a.vocab or 100) * a.dim
  print(f"wrote {a.path}: about {n / 1e6:.1f}M parameters ({a.qtype})")
  if a.benchmark:
    sys.exit(subprocess.call([sys.executable, "-m", "tinycore.llm", "--model", a.path, "--benchmark", "--max-tokens", "32", "--max-context", "256"]))
